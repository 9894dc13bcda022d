// Package pm is the persistent-memory core of scopedpm: one machine address
// space with volatile ranges (GPU device memory, host DRAM) and persistent
// ranges (named PM regions), typed loads and stores on its visible image, the
// durable image that survives a crash, and the Backend interface, the one seam
// through which every verb's timing and durability pass.
//
// Executors (package scope for GPU kernels, package coro for CPU tasks) apply
// each verb's visible effect to a Machine's Memory and report the verb to the
// Machine's Backend. A backend decides when each persist becomes durable and,
// if it models time, how long each verb takes. Backends: pm/functional (no
// timing, every persist durable at once), hwmodel (cycle accounting), and the
// checker's recorder (a wrapper around any backend).
//
// A Machine is not safe for concurrent use: one goroutine drives it at a time.
package pm
