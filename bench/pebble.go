//go:build unix

package bench

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"golang.org/x/sys/unix"

	"github.com/scopedpm/scopedpm/kvs"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/native"
)

func init() {
	Register(Experiment{
		Name: "kvs-vs-pebble",
		Description: "WALL-CLOCK time, not simulated: gpKVS on the native backend (log mode with its batches on the host " +
			"and as GPU kernels on the executor, and unsafe-nosync) against " +
			"Pebble with pebble.Sync per batch, same batches, same directory, on disk and on tmpfs (emulated PM): " +
			"keys/s, p50/p99 batch latency, bytes written per key; directory from $" + EnvBenchDir,
		NoSet: true,
		Run:   runKVSVsPebble,
	})
}

// EnvBenchDir names the environment variable with the directory kvs-vs-pebble
// runs its on-disk stores in (default: os.TempDir()). The emulated-PM runs
// use /dev/shm (tmpfs) when it exists.
const EnvBenchDir = "SCOPEDPM_BENCH_DIR"

// kvSide is one system under test: a gpKVS store on a native backend or a
// Pebble database, fed the same batches.
type kvSide interface {
	set(keys []uint32, vals []uint64) error // one batch, durable on return
	get(keys []uint32) error                // lookups, all must be found
	values(keys []uint32) ([]uint64, error) // lookups; 0 for a missing key
	close() error
	extra(keys int) []metric // side-specific metrics, per key
}

type metric struct {
	name string
	v    float64
}

// nativeSide is gpKVS on a native backend.
type nativeSide struct {
	be *native.Backend
	st *kvs.Store
	s0 native.Stats
}

// openNative opens gpKVS on a native backend in dir; with kernels its
// batches run as GPU kernels on the backend's executor, else on the host
// (kvs.HostBatches), as a Go program on pm/native would run them.
func openNative(dir string, mode native.Mode, buckets, maxBatch int, preload []uint32, kernels bool) (*nativeSide, error) {
	var opts []kvs.Option
	if !kernels {
		opts = append(opts, kvs.HostBatches())
	}
	// Preload without syncs (not timed), then reopen in the measured mode.
	if len(preload) > 0 {
		be, err := native.Open(dir, native.Options{Mode: native.ModeUnsafeNoSync})
		if err != nil {
			return nil, err
		}
		m, err := pm.NewMachine(be)
		if err != nil {
			return nil, err
		}
		st, err := kvs.Create(m, kvsConfig(buckets, maxBatch), opts...)
		if err != nil {
			return nil, err
		}
		for i := 0; i < len(preload); i += maxBatch {
			ks := preload[i:min(i+maxBatch, len(preload))]
			if _, err := st.SetBatch(ks, valsFor(ks, 0)); err != nil {
				return nil, err
			}
		}
		if err := be.Close(); err != nil {
			return nil, err
		}
	}
	be, err := native.Open(dir, native.Options{Mode: mode})
	if err != nil {
		return nil, err
	}
	m, err := pm.NewMachine(be)
	if err != nil {
		return nil, err
	}
	var st *kvs.Store
	if len(preload) > 0 {
		st, err = kvs.Open(m, "gpkvs", opts...)
	} else {
		st, err = kvs.Create(m, kvsConfig(buckets, maxBatch), opts...)
	}
	if err != nil {
		return nil, err
	}
	return &nativeSide{be: be, st: st, s0: be.Stats()}, nil
}

func kvsConfig(buckets, maxBatch int) kvs.Config {
	return kvs.Config{Buckets: buckets, MaxBatch: maxBatch, BlockThreads: min(256, maxBatch)}
}

func (n *nativeSide) set(keys []uint32, vals []uint64) error {
	_, err := n.st.SetBatch(keys, vals)
	return err
}

func (n *nativeSide) get(keys []uint32) error {
	_, found, err := n.st.GetBatch(keys)
	if err != nil {
		return err
	}
	if i := slices.Index(found, false); i >= 0 {
		return fmt.Errorf("bench: gpKVS lost key %d", keys[i])
	}
	return nil
}

func (n *nativeSide) values(keys []uint32) ([]uint64, error) {
	var out []uint64
	for i := 0; i < len(keys); i += n.st.MaxBatch() {
		vs, _, err := n.st.GetBatch(keys[i:min(i+n.st.MaxBatch(), len(keys))])
		if err != nil {
			return nil, err
		}
		out = append(out, vs...)
	}
	return out, nil
}

func (n *nativeSide) close() error { return n.be.Close() }

func (n *nativeSide) extra(keys int) []metric {
	s := n.be.Stats()
	k := float64(keys)
	return []metric{
		{"syncs_per_key", float64(s.Syncs-n.s0.Syncs) / k},
		{"synced_range_bytes_per_key", float64(s.SyncBytes-n.s0.SyncBytes) / k},
	}
}

// pebbleSide is a Pebble database; every SET batch is applied with
// pebble.Sync (the WAL is fsynced before Apply returns).
type pebbleSide struct {
	db *pebble.DB
}

type quietLogger struct{}

func (quietLogger) Infof(string, ...any)         {}
func (quietLogger) Errorf(string, ...any)        {}
func (quietLogger) Fatalf(f string, args ...any) { panic(fmt.Sprintf(f, args...)) }
func pebbleKey(k uint32, buf *[8]byte) []byte {
	binary.BigEndian.PutUint64(buf[:], uint64(k))
	return buf[:]
}
func pebbleVal(v uint64, buf *[8]byte) []byte {
	binary.LittleEndian.PutUint64(buf[:], v)
	return buf[:]
}
func valsFor(keys []uint32, round uint64) []uint64 { return valsInto(nil, keys, round) }

func valsInto(dst []uint64, keys []uint32, round uint64) []uint64 {
	dst = dst[:0]
	for _, k := range keys {
		dst = append(dst, uint64(k)<<20|round)
	}
	return dst
}

func openPebble(dir string, preload []uint32) (*pebbleSide, error) {
	db, err := pebble.Open(dir, &pebble.Options{Logger: quietLogger{}})
	if err != nil {
		return nil, err
	}
	p := &pebbleSide{db: db}
	for i := 0; i < len(preload); i += 4096 {
		ks := preload[i:min(i+4096, len(preload))]
		b := db.NewBatch()
		var kb, vb [8]byte
		for _, k := range ks {
			if err := b.Set(pebbleKey(k, &kb), pebbleVal(uint64(k)<<20, &vb), nil); err != nil {
				return nil, err
			}
		}
		if err := db.Apply(b, pebble.NoSync); err != nil {
			return nil, err
		}
	}
	if len(preload) > 0 {
		if err := db.Flush(); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func (p *pebbleSide) set(keys []uint32, vals []uint64) error {
	b := p.db.NewBatchWithSize(len(keys) * 32)
	var kb, vb [8]byte
	for i, k := range keys {
		if err := b.Set(pebbleKey(k, &kb), pebbleVal(vals[i], &vb), nil); err != nil {
			return err
		}
	}
	return p.db.Apply(b, pebble.Sync)
}

func (p *pebbleSide) get(keys []uint32) error {
	var kb [8]byte
	for _, k := range keys {
		v, c, err := p.db.Get(pebbleKey(k, &kb))
		if err != nil {
			return fmt.Errorf("bench: pebble key %d: %w", k, err)
		}
		_ = v
		c.Close()
	}
	return nil
}

func (p *pebbleSide) values(keys []uint32) ([]uint64, error) {
	var kb [8]byte
	out := make([]uint64, len(keys))
	for i, k := range keys {
		v, c, err := p.db.Get(pebbleKey(k, &kb))
		if errors.Is(err, pebble.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out[i] = binary.LittleEndian.Uint64(v)
		c.Close()
	}
	return out, nil
}

func (p *pebbleSide) close() error { return p.db.Close() }

func (p *pebbleSide) extra(keys int) []metric {
	m := p.db.Metrics()
	t := m.Total()
	lsm := m.WAL.BytesWritten + t.TableBytesFlushed + t.TableBytesCompacted + t.BlobBytesFlushed + t.BlobBytesCompacted
	return []metric{{"lsm_bytes_per_key", float64(lsm) / float64(keys)}}
}

// procWriteBytes returns write_bytes of /proc/self/io: bytes this process
// caused to be sent to a block device, counted when a page cache page is
// dirtied (so a page re-dirtied after each sync counts again). tmpfs
// pages are never counted.
func procWriteBytes() (uint64, error) {
	f, err := os.Open("/proc/self/io")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "write_bytes: "); ok {
			return strconv.ParseUint(v, 10, 64)
		}
	}
	return 0, errors.New("bench: no write_bytes in /proc/self/io")
}

// cpuTime returns the process's user+system CPU time (all threads): over
// the wall time of a run it tells a CPU-bound side (near 1 or above) from
// one waiting for its syncs (near 0).
func cpuTime() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// fsName names the filesystem holding dir.
func fsName(dir string) string {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return "unknown"
	}
	switch st.Type {
	case 0xEF53:
		return "ext4"
	case 0x01021994:
		return "tmpfs"
	case 0x58465342:
		return "xfs"
	case 0x9123683E:
		return "btrfs"
	case 0x794c7630:
		return "overlayfs"
	}
	return fmt.Sprintf("fs-%#x", st.Type)
}

// sys is one side of kvs-vs-pebble: a name for the rows and how to open it.
type sys struct {
	name string
	open func(dir string, batch int, preload []uint32) (kvSide, error)
}

// kvsBenchShape sizes kvs-vs-pebble.
type kvsBenchShape struct {
	batches  []int
	keySpace int           // distinct keys (SET windows cycle over them)
	budget   time.Duration // timed run per configuration (at least minBatches)
}

const minBatches = 3

func kvsBenchShapeFor(o Options) kvsBenchShape {
	if o.Quick && o.Smoke {
		return kvsBenchShape{batches: []int{1, 100}, keySpace: 1 << 10, budget: 10 * time.Millisecond}
	}
	if o.Quick {
		return kvsBenchShape{batches: []int{1, 100, 1000}, keySpace: 1 << 14, budget: 250 * time.Millisecond}
	}
	return kvsBenchShape{batches: []int{1, 100, 1000, 65536}, keySpace: 1 << 18, budget: 2 * time.Second}
}

// benchFS is one filesystem the wall-clock comparisons run on.
type benchFS struct {
	label   string      // "disk(ext4)", "tmpfs(tmpfs)"
	dir     string      // where the sides' directories go
	durable native.Mode // the native backend's durable mode there: dax on a DAX filesystem, else log
}

// benchFilesystems returns the disk ($SCOPEDPM_BENCH_DIR, else the
// temporary directory) and tmpfs (/dev/shm) where it exists; for a smoke
// run only the last of them (a check of the harness: tmpfs spares it the
// disk's fsyncs).
func benchFilesystems(smoke bool) []benchFS {
	disk := os.Getenv(EnvBenchDir)
	if disk == "" {
		disk = os.TempDir()
	}
	type fsDir struct{ label, dir string }
	dirs := []fsDir{{"disk", disk}}
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		dirs = append(dirs, fsDir{"tmpfs", "/dev/shm"})
	}
	if smoke {
		dirs = dirs[len(dirs)-1:]
	}
	out := make([]benchFS, len(dirs))
	for i, d := range dirs {
		durable := native.ModeLog
		if native.DAXSupport(d.dir) == nil {
			durable = native.ModeDAX
		}
		out[i] = benchFS{d.label + "(" + fsName(d.dir) + ")", d.dir, durable}
	}
	return out
}

func runKVSVsPebble(ctx context.Context, o Options) ([]Row, error) {
	sh := kvsBenchShapeFor(o)
	dirs := benchFilesystems(o.Smoke)
	buckets := sh.keySpace / 2
	// systemsFor lists the sides on the filesystem of dir: gpKVS in the
	// durable mode the native backend picks there (dax on a DAX
	// filesystem with CLWB or CLFLUSHOPT, else log), with its batches on
	// the host (kvs.HostBatches) and as GPU kernels on the backend's
	// executor; gpKVS with no durability at all (the bound the syncs are
	// measured against), and Pebble with a synced batch.
	systemsFor := func(durable native.Mode) []sys {
		return []sys{
			{"gpkvs-native-" + durable.String(), func(dir string, batch int, pre []uint32) (kvSide, error) {
				return openNative(dir, durable, buckets, batch, pre, false)
			}},
			{"gpkvs-native-" + durable.String() + "-kernels", func(dir string, batch int, pre []uint32) (kvSide, error) {
				return openNative(dir, durable, buckets, batch, pre, true)
			}},
			{"gpkvs-native-unsafe-nosync", func(dir string, batch int, pre []uint32) (kvSide, error) {
				return openNative(dir, native.ModeUnsafeNoSync, buckets, batch, pre, false)
			}},
			{"pebble-sync", func(dir string, _ int, pre []uint32) (kvSide, error) { return openPebble(dir, pre) }},
		}
	}
	var rows []Row
	item := 0
	total := len(dirs) * 2 * len(sh.batches)
	o.progress(total, 0)
	for _, fd := range dirs {
		fsLabel := fd.label
		systems := systemsFor(fd.durable)
		for _, mix := range []string{"set", "get95"} {
			for _, batch := range sh.batches {
				item++
				if !o.mine(item - 1) {
					continue
				}
				workload := fmt.Sprintf("%s/b%d", mix, batch)
				tput := map[string]float64{}
				ms, err := runInterleaved(ctx, sh, systems, fd.dir, mix, batch)
				if err != nil {
					return rows, fmt.Errorf("bench: kvs-vs-pebble %s %s: %w", fsLabel, workload, err)
				}
				for i, s := range systems {
					cfg := fsLabel + "/" + s.name
					for _, m := range ms[i] {
						rows = append(rows, Row{Experiment: "kvs-vs-pebble", Workload: workload, Config: cfg, Metric: m.name, Value: m.v})
						if m.name == "keys_per_s" {
							tput[s.name] = m.v
						}
					}
				}
				for _, s := range systems[:2] {
					if p := tput["pebble-sync"]; p > 0 {
						rows = append(rows, Row{Experiment: "kvs-vs-pebble", Workload: workload, Config: fsLabel + "/" + s.name,
							Metric: "x_pebble_keys_per_s", Value: tput[s.name] / p})
					}
				}
				o.progress(0, 1)
			}
		}
	}
	return rows, nil
}

// timeSlices is how many alternating time slices each side of a
// configuration gets.
const timeSlices = 4

// slicedRun is one side of a wall-clock comparison in progress: a store
// opened and preloaded, timing its operations slice by slice.
type slicedRun interface {
	// run times operations until this slice lasted budget and ran at
	// least minN of them.
	run(budget time.Duration, minN int) error
	// timed is how many operations (or batches) it has timed so far.
	timed() int
	// finish closes the store and returns the side's metrics.
	finish() ([]metric, error)
	// abort closes the store after a failure.
	abort()
}

// interleave starts every side (start opens side i in a fresh directory
// named after prefix under parent) and runs them in alternating slices of
// budget, each at least one operation and each side at least minTotal in
// all, so all sides see the same background load; then it finishes them
// and returns each side's metrics.
func interleave(ctx context.Context, parent, prefix string, names []string, budget time.Duration, minTotal int, start func(i int, dir string) (slicedRun, error)) ([][]metric, error) {
	runs := make([]slicedRun, len(names))
	defer func() {
		for _, r := range runs {
			if r != nil {
				r.abort()
			}
		}
	}()
	for i, name := range names {
		dir, err := os.MkdirTemp(parent, prefix+"-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		if runs[i], err = start(i, dir); err != nil {
			runs[i] = nil
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	for k := range timeSlices {
		for i, r := range runs {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			minN := 1
			if k == timeSlices-1 {
				minN = max(1, minTotal-r.timed())
			}
			if err := r.run(budget/timeSlices, minN); err != nil {
				return nil, fmt.Errorf("%s: %w", names[i], err)
			}
		}
	}
	out := make([][]metric, len(runs))
	for i, r := range runs {
		ms, err := r.finish()
		runs[i] = nil
		if err != nil {
			return nil, fmt.Errorf("%s: %w", names[i], err)
		}
		out[i] = ms
	}
	return out, nil
}

// runInterleaved runs the kvs-vs-pebble sides of one configuration
// (interleave).
func runInterleaved(ctx context.Context, sh kvsBenchShape, systems []sys, parent, mix string, batch int) ([][]metric, error) {
	names := make([]string, len(systems))
	for i, s := range systems {
		names[i] = s.name
	}
	return interleave(ctx, parent, "kvs-vs-pebble", names, sh.budget, minBatches, func(i int, dir string) (slicedRun, error) {
		r, err := startSide(sh, systems[i].open, dir, mix, batch)
		if err != nil {
			return nil, err
		}
		return kvsSliced{r}, nil
	})
}

// kvsSliced is a kvs-vs-pebble side as a slicedRun.
type kvsSliced struct{ *sideRun }

func (r kvsSliced) timed() int { return len(r.lat) }
func (r kvsSliced) abort()     { r.side.close() }
func (r kvsSliced) finish() ([]metric, error) {
	ms, _, err := r.sideRun.finish(false)
	return ms, err
}

// sideRows returns the rows of one configuration of a wall-clock
// comparison: every side's metrics, and the first side's rate (metric
// rate) over Pebble's and bbolt's where they ran, as x_pebble_<rate> and
// x_bbolt_<rate>.
func sideRows(exp, workload, fsLabel string, names []string, ms [][]metric, rate string) []Row {
	var rows []Row
	tput := map[string]float64{}
	for i, name := range names {
		for _, m := range ms[i] {
			rows = append(rows, Row{Experiment: exp, Workload: workload, Config: fsLabel + "/" + name, Metric: m.name, Value: m.v})
			if m.name == rate {
				tput[name] = m.v
			}
		}
	}
	for _, base := range []string{"pebble-sync", "bbolt"} {
		if p := tput[base]; p > 0 {
			rows = append(rows, Row{Experiment: exp, Workload: workload, Config: fsLabel + "/" + names[0],
				Metric: "x_" + strings.TrimSuffix(base, "-sync") + "_" + rate, Value: tput[names[0]] / p})
		}
	}
	return rows
}

// wallMeter is what one side of a wall-clock comparison measured: its
// operations' latencies, the units they did (keys, transfers), its wall
// and CPU time, the bytes the process wrote and the RSS its open added.
type wallMeter struct {
	lat      []time.Duration
	done     int
	elapsed  time.Duration
	cpu      time.Duration
	wbytes   uint64
	rssBytes uint64
}

// timeSlice runs operations of units units each until the slice lasted
// budget and ran at least minN of them, or prepare returns false, and adds
// what it measured. prepare draws the next operation's inputs (untimed),
// op does it (timed).
func (m *wallMeter) timeSlice(budget time.Duration, minN, units int, prepare func() bool, op func() error) error {
	w0, err := procWriteBytes()
	if err != nil {
		return err
	}
	c0 := cpuTime()
	start := time.Now()
	for n := 0; (n < minN || time.Since(start) < budget) && prepare(); n++ {
		t0 := time.Now()
		if err := op(); err != nil {
			return err
		}
		m.lat = append(m.lat, time.Since(t0))
		m.done += units
	}
	m.elapsed += time.Since(start)
	m.cpu += cpuTime() - c0
	w1, err := procWriteBytes()
	if err != nil {
		return err
	}
	m.wbytes += w1 - w0
	return nil
}

// closeCounted closes the side with close, counting the writes it makes.
func (m *wallMeter) closeCounted(close func() error) error {
	w0, err := procWriteBytes()
	if err != nil {
		close()
		return err
	}
	if err := close(); err != nil {
		return err
	}
	w1, err := procWriteBytes()
	if err != nil {
		return err
	}
	m.wbytes += w1 - w0
	return nil
}

// metrics returns <unit>s_per_s, the p50 and p99 latency, the operations,
// dev_write_bytes_per_<unit> (procWriteBytes: the kernel counts a page
// cache folio whole each time a write dirties it again, so a small record
// appended after a sync counts its folio's size, 256 KiB for the native
// log's zeroed chunks on a 6.x kernel, not its bytes), CPU per wall second
// and the RSS the open added.
func (m *wallMeter) metrics(unit string) []metric {
	slices.Sort(m.lat)
	pct := func(p float64) float64 { return float64(m.lat[min(len(m.lat)-1, int(p*float64(len(m.lat))))]) / 1e3 }
	return []metric{
		{unit + "s_per_s", float64(m.done) / m.elapsed.Seconds()},
		{"op_p50_us", pct(0.50)},
		{"op_p99_us", pct(0.99)},
		{"ops", float64(len(m.lat))},
		{"dev_write_bytes_per_" + unit, float64(m.wbytes) / float64(m.done)},
		{"cpu_per_wall", m.cpu.Seconds() / m.elapsed.Seconds()},
		{"open_rss_mib", float64(m.rssBytes) / (1 << 20)},
	}
}

// runKVSSideFinal runs one configuration alone: preload (GET mix), then
// batches for the time budget (at least minBatches); with final set it
// also returns every key's value after the run (0: absent), for tests that
// the sides agree.
func runKVSSideFinal(sh kvsBenchShape, open func(string, int, []uint32) (kvSide, error), dir, mix string, batch int, final bool) ([]metric, []uint64, error) {
	r, err := startSide(sh, open, dir, mix, batch)
	if err != nil {
		return nil, nil, err
	}
	if err := r.run(sh.budget, minBatches); err != nil {
		r.side.close()
		return nil, nil, err
	}
	return r.finish(final)
}

// sideRun is one side of a comparison in progress. The sides of one
// configuration run in alternating time slices, so that a noisy neighbour
// (another process's I/O or CPU) hits all of them alike.
type sideRun struct {
	side             kvSide
	all              []uint32
	rng              *rand.Rand
	mix              string
	batch            int
	next             int
	round            uint64
	lat              []time.Duration
	keys, sets, gets int
	elapsed, cpu     time.Duration
	wbytes           uint64
	setKeys, getKeys []uint32
	vals             []uint64
}

// startSide opens a side in dir and preloads it for the GET mix.
func startSide(sh kvsBenchShape, open func(string, int, []uint32) (kvSide, error), dir, mix string, batch int) (*sideRun, error) {
	keySpace := min(sh.keySpace, max(4096, 16*batch))
	r := &sideRun{rng: rand.New(rand.NewPCG(uint64(batch), 0x6b76)), mix: mix, batch: batch,
		all: make([]uint32, keySpace), setKeys: make([]uint32, 0, batch), getKeys: make([]uint32, 0, batch)}
	for i := range r.all {
		r.all[i] = uint32(i + 1)
	}
	var preload []uint32
	if mix == "get95" {
		preload = r.all
	}
	side, err := open(dir, batch, preload)
	if err != nil {
		return nil, err
	}
	r.side = side
	return r, nil
}

// run runs batches until this slice lasted budget and ran at least minB
// batches.
func (r *sideRun) run(budget time.Duration, minB int) error {
	w0, err := procWriteBytes()
	if err != nil {
		return err
	}
	c0 := cpuTime()
	start := time.Now()
	for n := 0; n < minB || time.Since(start) < budget; n++ {
		r.round++
		// The batch's keys: a window of the key space (distinct keys),
		// split 95:5 GET:SET in the GET mix (a batch of one is a GET with
		// probability 0.95).
		r.setKeys, r.getKeys = r.setKeys[:0], r.getKeys[:0]
		nset := r.batch
		if r.mix == "get95" {
			nset = r.batch / 20
			if r.batch < 20 && r.rng.IntN(20) == 0 {
				nset = r.batch
			}
		}
		for i := range r.batch {
			k := r.all[(r.next+i)%len(r.all)]
			if i < nset {
				r.setKeys = append(r.setKeys, k)
			} else {
				r.getKeys = append(r.getKeys, k)
			}
		}
		r.next = (r.next + r.batch) % len(r.all)
		r.vals = valsInto(r.vals, r.setKeys, r.round)
		t0 := time.Now()
		if len(r.getKeys) > 0 {
			if err := r.side.get(r.getKeys); err != nil {
				return err
			}
		}
		if len(r.setKeys) > 0 {
			if err := r.side.set(r.setKeys, r.vals); err != nil {
				return err
			}
		}
		r.lat = append(r.lat, time.Since(t0))
		r.keys += r.batch
		r.sets += len(r.setKeys)
		r.gets += len(r.getKeys)
	}
	r.elapsed += time.Since(start)
	r.cpu += cpuTime() - c0
	w1, err := procWriteBytes()
	if err != nil {
		return err
	}
	r.wbytes += w1 - w0
	return nil
}

// finish closes the side (its closing writes count) and returns its
// metrics and, with final set, every key's value.
func (r *sideRun) finish(final bool) ([]metric, []uint64, error) {
	ms := r.side.extra(r.keys)
	var vals []uint64
	var err error
	if final {
		if vals, err = r.side.values(r.all); err != nil {
			r.side.close()
			return nil, nil, err
		}
	}
	w0, err := procWriteBytes()
	if err != nil {
		return nil, nil, err
	}
	if err := r.side.close(); err != nil {
		return nil, nil, err
	}
	w1, err := procWriteBytes()
	if err != nil {
		return nil, nil, err
	}
	r.wbytes += w1 - w0
	slices.Sort(r.lat)
	pct := func(p float64) float64 { return float64(r.lat[min(len(r.lat)-1, int(p*float64(len(r.lat))))]) / 1e3 }
	out := []metric{
		{"keys_per_s", float64(r.keys) / r.elapsed.Seconds()},
		{"batch_p50_us", pct(0.50)},
		{"batch_p99_us", pct(0.99)},
		{"batches", float64(len(r.lat))},
		{"sets", float64(r.sets)},
		{"gets", float64(r.gets)},
		{"dev_write_bytes_per_key", float64(r.wbytes) / float64(r.keys)},
		{"cpu_per_wall", r.cpu.Seconds() / r.elapsed.Seconds()},
	}
	return append(out, ms...), vals, nil
}
