//go:build unix

package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/scopedpm/scopedpm/btree"
	"github.com/scopedpm/scopedpm/pm/native"
)

func init() {
	Register(Experiment{
		Name: "load-vs-pebble",
		Description: "WALL-CLOCK time and the host's memory, not simulated: each store loads random keys in durable " +
			"batches of 1,000 into an empty directory, in a process of its own (this program started again, so every " +
			"side pays the same program's pages): the B+tree (btree.OpenDir with its defaults: it grows from 65,536 " +
			"nodes), Pebble (default options, pebble.Sync per batch) and bbolt (one Update per batch); keys/s, the " +
			"process's peak RSS (getrusage), and the bytes its directory holds after Close; 1M keys at paper size, " +
			"65,536 at quick size, 4,096 at smoke size; on disk and tmpfs; directory from $" + EnvBenchDir + ". The " +
			"sides run one after another, not interleaved: btree-vs-pebble is the throughput comparison, this one " +
			"the memory and the load's cost at a size it does not reach",
		NoSet: true,
		Run:   runLoadVsPebble,
	})
}

// envLoadChild, when set, makes this process a side of load-vs-pebble (see
// ChildMain): "side mode keys dir", mode the native backend's durable mode
// on dir's filesystem.
const envLoadChild = "SCOPEDPM_LOAD_CHILD"

// loadBatch is the keys a load-vs-pebble batch writes.
const loadBatch = 1000

// loadKeysFor sizes load-vs-pebble.
func loadKeysFor(o Options) int {
	switch {
	case o.Quick && o.Smoke:
		return 1 << 12
	case o.Quick:
		return 1 << 16
	}
	return 1_000_000
}

// loadSides are load-vs-pebble's stores: a name for the rows and how to
// open one, empty, in dir (mode: the native backend's durable mode on
// dir's filesystem).
var loadSides = []struct {
	name string
	open func(dir string, mode native.Mode) (ordStore, error)
}{
	{"btree-native", openLoadBtree},
	{"pebble-sync", func(dir string, _ native.Mode) (ordStore, error) { return openPebbleOrd(dir, nil) }},
	{"bbolt", func(dir string, _ native.Mode) (ordStore, error) { return openBolt(dir, nil) }},
}

// loadResult is what a side's process reports on its standard output.
type loadResult struct {
	Seconds   float64 `json:"seconds"`
	PeakBytes uint64  `json:"peak_bytes"`
	DiskBytes uint64  `json:"disk_bytes"`
}

func runLoadVsPebble(ctx context.Context, o Options) ([]Row, error) {
	keys := loadKeysFor(o)
	dirs := benchFilesystems(o.Smoke)
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("bench: load-vs-pebble: %w", err)
	}
	var rows []Row
	o.progress(len(dirs), 0)
	for i, fd := range dirs {
		if !o.mine(i) {
			continue
		}
		names := make([]string, len(loadSides))
		ms := make([][]metric, len(loadSides))
		for si, s := range loadSides {
			names[si] = s.name
			if s.name == "btree-native" {
				names[si] += "-" + fd.durable.String()
			}
			r, err := runLoadChild(ctx, exe, fd.dir, fmt.Sprintf("%s %s %d", s.name, fd.durable, keys))
			if err != nil {
				return rows, fmt.Errorf("bench: load-vs-pebble %s %s: %w", fd.label, s.name, err)
			}
			ms[si] = []metric{
				{"keys_per_s", float64(keys) / r.Seconds},
				{"peak_rss_mib", float64(r.PeakBytes) / (1 << 20)},
				{"disk_mib", float64(r.DiskBytes) / (1 << 20)},
			}
		}
		workload := fmt.Sprintf("load%d/b%d", keys, loadBatch)
		rows = append(rows, sideRows("load-vs-pebble", workload, fd.label, names, ms, "keys_per_s")...)
		// The B+tree's peak RSS over each baseline's (1 = the same).
		for si := 1; si < len(names); si++ {
			rows = append(rows, Row{Experiment: "load-vs-pebble", Workload: workload, Config: fd.label + "/" + names[0],
				Metric: "x_" + strings.TrimSuffix(names[si], "-sync") + "_peak_rss", Value: ms[0][1].v / ms[si][1].v})
		}
		o.progress(0, 1)
	}
	return rows, nil
}

// runLoadChild runs one side in a process of its own (exe, with
// envLoadChild set to spec and a fresh directory under parent) and returns
// what it reports.
func runLoadChild(ctx context.Context, exe, parent, spec string) (loadResult, error) {
	dir, err := os.MkdirTemp(parent, "load-vs-pebble-")
	if err != nil {
		return loadResult{}, err
	}
	defer os.RemoveAll(dir)
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), envLoadChild+"="+spec+" "+dir)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return loadResult{}, fmt.Errorf("side process: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	var r loadResult
	if err := json.Unmarshal(out, &r); err != nil {
		return loadResult{}, fmt.Errorf("side process printed %q: %w", out, err)
	}
	if r.Seconds <= 0 || r.PeakBytes == 0 {
		return loadResult{}, fmt.Errorf("side process reported %+v", r)
	}
	return r, nil
}

// ChildMain returns at once unless this process was started by an
// experiment to run one of its sides in a process of its own
// (load-vs-pebble); then it runs that side, prints what it measured, and
// exits. A program that runs experiments (pmbench, the package's tests)
// calls it first thing in main or TestMain.
func ChildMain() {
	spec, ok := os.LookupEnv(envLoadChild)
	if !ok {
		return
	}
	r, err := loadChild(spec)
	if err == nil {
		err = json.NewEncoder(os.Stdout).Encode(r)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: load-vs-pebble side:", err)
		os.Exit(2)
	}
	os.Exit(0)
}

// loadChild is a side of load-vs-pebble (spec: see envLoadChild).
func loadChild(spec string) (loadResult, error) {
	f := strings.SplitN(spec, " ", 4) // the directory last: it may hold spaces
	if len(f) != 4 {
		return loadResult{}, fmt.Errorf("bad %s %q", envLoadChild, spec)
	}
	mode, err1 := native.ParseMode(f[1])
	n, err2 := strconv.Atoi(f[2])
	if err := errors.Join(err1, err2); err != nil || n < 1 {
		return loadResult{}, fmt.Errorf("bad %s %q: %w", envLoadChild, spec, err)
	}
	dir := f[3]
	var open func(string, native.Mode) (ordStore, error)
	for _, s := range loadSides {
		if s.name == f[0] {
			open = s.open
		}
	}
	if open == nil {
		return loadResult{}, fmt.Errorf("no side %q", f[0])
	}
	start := time.Now()
	st, err := open(dir, mode)
	if err != nil {
		return loadResult{}, err
	}
	rng := rand.New(rand.NewPCG(0x6c6f6164, uint64(n)))
	ks, vs := make([]uint64, loadBatch), make([]uint64, loadBatch)
	for done := 0; done < n; done += loadBatch {
		m := min(loadBatch, n-done)
		for i := range m {
			ks[i] = rng.Uint64()
			vs[i] = ordVal(ks[i], 0)
		}
		if err := st.putBatch(ks[:m], vs[:m]); err != nil {
			_ = st.close()
			return loadResult{}, err
		}
	}
	if err := st.close(); err != nil {
		return loadResult{}, err
	}
	r := loadResult{Seconds: time.Since(start).Seconds()}
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return loadResult{}, fmt.Errorf("getrusage: %w", err)
	}
	r.PeakBytes = uint64(ru.Maxrss)
	if runtime.GOOS != "darwin" { // darwin counts bytes, the others KiB
		r.PeakBytes *= 1024
	}
	err = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			r.DiskBytes += allocated(info)
		}
		return err
	})
	return r, err
}

// allocated returns the bytes the file of info takes on its filesystem
// (a region file is sparse where the tree has not reached), or its size
// where the system does not say.
func allocated(info fs.FileInfo) uint64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Blocks) * 512
	}
	return uint64(info.Size())
}

// openLoadBtree opens an empty B+tree DB in dir with OpenDir's defaults in
// mode, as a user would.
func openLoadBtree(dir string, mode native.Mode) (ordStore, error) {
	db, err := btree.OpenDir(dir, &btree.DirOptions{Mode: mode})
	if err != nil {
		return nil, err
	}
	return &btreeStore{db: db, s0: db.Stats()}, nil
}
