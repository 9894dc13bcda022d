package bench

// ForgetRuns drops the runs this process keeps (runApp, cpuRun), so that
// the next run of an experiment simulates again.
var ForgetRuns = forgetRuns
