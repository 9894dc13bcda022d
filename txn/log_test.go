package txn_test

import (
	"encoding/binary"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/coro"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
	"github.com/scopedpm/scopedpm/txn"
)

type logKind struct {
	name   string
	create func(m *pm.Machine, name string) (txn.Log, error)
	open   func(m *pm.Machine, name string) (txn.Log, error)
}

var logKinds = []logKind{
	{"conv",
		func(m *pm.Machine, n string) (txn.Log, error) { return txn.CreateConv(m, n, 4, 512) },
		func(m *pm.Machine, n string) (txn.Log, error) { return txn.OpenConv(m, n) }},
	{"hcl",
		func(m *pm.Machine, n string) (txn.Log, error) { return txn.CreateHCL(m, n, 2, 64, 512) },
		func(m *pm.Machine, n string) (txn.Log, error) { return txn.OpenHCL(m, n) }},
	{"cpu",
		func(m *pm.Machine, n string) (txn.Log, error) { return txn.CreateCPU(m, n, 4, 512) },
		func(m *pm.Machine, n string) (txn.Log, error) { return txn.OpenCPU(m, n) }},
}

func TestLogOps(t *testing.T) {
	for _, k := range logKinds {
		t.Run(k.name, func(t *testing.T) {
			m := newMachine(t)
			l, err := k.create(m, "log")
			require.NoError(t, err)
			h := txn.Host(m)
			const p = 3

			_, err = l.Read(h, p)
			require.ErrorIs(t, err, txn.ErrEmpty)
			require.ErrorIs(t, l.Remove(h, p), txn.ErrEmpty)

			want := [][]byte{[]byte("a"), []byte("hello, world"), {}, make([]byte, 40)}
			for _, e := range want {
				require.NoError(t, l.Insert(h, p, e))
			}
			got, err := l.Entries(h, p)
			require.NoError(t, err)
			require.Len(t, got, len(want))
			for i := range want {
				require.Equal(t, want[i], got[i], "entry %d", i)
			}
			n, err := l.Size(h, p)
			require.NoError(t, err)
			require.Positive(t, n)
			last, err := l.Read(h, p)
			require.NoError(t, err)
			require.Equal(t, want[3], last)

			require.NoError(t, l.Remove(h, p))
			last, err = l.Read(h, p)
			require.NoError(t, err)
			require.Equal(t, want[2], last)
			require.NoError(t, l.Insert(h, p, []byte("again")))
			got, err = l.Entries(h, p)
			require.NoError(t, err)
			require.Equal(t, []byte("again"), got[3])
			require.NoError(t, l.Check(h))

			// Other partitions are untouched.
			n, err = l.Size(h, 0)
			require.NoError(t, err)
			require.Zero(t, n)

			// Fill up.
			for err == nil {
				err = l.Insert(h, p, make([]byte, 100))
			}
			require.ErrorIs(t, err, txn.ErrFull)

			require.NoError(t, l.Clear(h, p))
			n, err = l.Size(h, p)
			require.NoError(t, err)
			require.Zero(t, n)
			got, err = l.Entries(h, p)
			require.NoError(t, err)
			require.Empty(t, got)

			// Bad input is an error.
			require.ErrorIs(t, l.Insert(h, -1, nil), txn.ErrBadArg)
			require.ErrorIs(t, l.Insert(h, l.Parts(), nil), txn.ErrBadArg)
			require.ErrorIs(t, l.Insert(nil, 0, nil), txn.ErrBadArg)

			// Reopen after a crash: same contents.
			require.NoError(t, l.Insert(h, 1, []byte("durable")))
			img, err := m.Crash()
			require.NoError(t, err)
			m2 := reopen(t, img)
			l2, err := k.open(m2, "log")
			require.NoError(t, err)
			e, err := l2.Read(txn.Host(m2), 1)
			require.NoError(t, err)
			require.Equal(t, []byte("durable"), e)
			require.NoError(t, l2.Check(txn.Host(m2)))
		})
	}
}

func TestCreateBadArgs(t *testing.T) {
	m := newMachine(t)
	cases := []struct {
		name string
		err  error
	}{
		{"conv-parts", func() error { _, err := txn.CreateConv(m, "a", 0, 128); return err }()},
		{"conv-cap", func() error { _, err := txn.CreateConv(m, "a", 1, 8); return err }()},
		{"hcl-blocks", func() error { _, err := txn.CreateHCL(m, "a", 0, 32, 64); return err }()},
		{"hcl-cap", func() error { _, err := txn.CreateHCL(m, "a", 1, 32, 4); return err }()},
		{"est", func() error { _, err := txn.CreateEST(m, "a", 0); return err }()},
		{"ckpt", func() error { _, err := txn.CreateCheckpoint(m, "a", 0, 1, 128); return err }()},
		{"nil machine", func() error { _, err := txn.CreateConv(nil, "a", 1, 128); return err }()},
	}
	for _, c := range cases {
		require.ErrorIs(t, c.err, txn.ErrBadArg, c.name)
	}
	_, err := txn.OpenConv(m, "missing")
	require.ErrorIs(t, err, pm.ErrNoRegion)
	_, err = txn.CreateHCL(m, "h", 1, 32, 64)
	require.NoError(t, err)
	_, err = txn.OpenConv(m, "h")
	require.ErrorIs(t, err, txn.ErrCorrupt, "an HCL region is not a conventional log")
}

// A corrupt or stale entry is reported, never replayed.
func TestLogCorruptEntry(t *testing.T) {
	m := newMachine(t)
	l, err := txn.CreateConv(m, "log", 1, 256)
	require.NoError(t, err)
	h := txn.Host(m)
	require.NoError(t, l.Insert(h, 0, []byte("first entry")))
	require.NoError(t, l.Insert(h, 0, []byte("second")))
	ctrl := l.Region().Base.Add(txn.Line)
	w, err := m.Memory().Load(ctrl, 8)
	require.NoError(t, err)

	// A flipped payload byte.
	data := l.Region().Base.Add(2 * txn.Line)
	b := readPM(t, m, data, 1)
	require.NoError(t, m.CopyIn(data, []byte{b[0] ^ 0x40}))
	_, err = l.Entries(h, 0)
	require.ErrorIs(t, err, txn.ErrCorrupt)
	require.ErrorIs(t, l.Check(h), txn.ErrCorrupt)
	require.NoError(t, m.CopyIn(data, b))
	require.NoError(t, l.Check(h))

	// After Clear, restoring the old tail under the new generation finds
	// entries of the old generation: they do not verify.
	require.NoError(t, l.Clear(h, 0))
	var nw [8]byte
	binary.LittleEndian.PutUint64(nw[:], w+1<<32)
	require.NoError(t, m.CopyIn(ctrl, nw[:]))
	_, err = l.Entries(h, 0)
	require.ErrorIs(t, err, txn.ErrCorrupt)
	_, err = txn.Recover(h, l, 0)
	require.ErrorIs(t, err, txn.ErrCorrupt)

	// A tail past the capacity.
	binary.LittleEndian.PutUint64(nw[:], 1<<20)
	require.NoError(t, m.CopyIn(ctrl, nw[:]))
	_, err = l.Size(h, 0)
	require.ErrorIs(t, err, txn.ErrCorrupt)
	require.NoError(t, l.Clear(h, 0), "Clear repairs the control word")
	require.NoError(t, l.Check(h))
}

// HCL: a warp's 4-byte entries are striped so that each stripe of the 32
// lanes fills one 128-byte line, and no lock (no atomic) is taken.
func TestHCLCoalescedNoLock(t *testing.T) {
	m, rec := newRecorded(t)
	l, err := txn.CreateHCL(m, "hcl", 2, 64, 64)
	require.NoError(t, err)
	var errs [128]error
	_, err = scope.Launch(m, scope.Grid{Blocks: 2, Threads: 64}, func(th *scope.Thread) {
		x := txn.GPU(th)
		p, err := l.Part(x)
		if err == nil {
			var v [4]byte
			binary.LittleEndian.PutUint32(v[:], uint32(th.ID()))
			err = l.Insert(x, p, v[:])
		}
		errs[th.ID()] = err
	})
	require.NoError(t, err)
	for i, e := range errs {
		require.NoError(t, e, "thread %d", i)
	}
	lines := map[pm.Addr]map[int]bool{} // line -> lanes
	stores := 0
	for _, e := range rec.Events() {
		require.NotEqual(t, pm.OpAtomic, e.Op.Kind, "HCL takes no lock: %v", &e)
		if e.Op.Kind != pm.OpStore || !l.Region().Contains(e.Op.Addr, 1) {
			continue
		}
		if e.Op.Size == 4 {
			stores++
			line := e.Op.Addr &^ (txn.Line - 1)
			if lines[line] == nil {
				lines[line] = map[int]bool{}
			}
			require.Equal(t, uint64(4*e.Agent.Lane), uint64(e.Op.Addr-line), "lane offset")
			lines[line][e.Agent.Warp] = true
			lines[line][1000+e.Agent.Lane] = true
		}
	}
	// 4 warps × 3 stripes (payload, length, checksum), each one full line
	// written by one warp's 32 lanes.
	require.Equal(t, 4*3*32, stores)
	require.Len(t, lines, 4*3)
	for line, who := range lines {
		require.Len(t, who, 33, "line %v: one warp, 32 lanes", line)
	}
	// The payloads of warp 0's 32 lanes land in one line.
	h := txn.Host(m)
	first := l.WordAddr(0, 0) &^ (txn.Line - 1)
	for lane := 0; lane < 32; lane++ {
		s, err := l.Slot(0, 0, lane)
		require.NoError(t, err)
		require.Equal(t, first, l.WordAddr(s, 0)&^(txn.Line-1))
		e, err := l.Read(h, s)
		require.NoError(t, err)
		require.Equal(t, uint32(lane), binary.LittleEndian.Uint32(e))
	}
	require.NoError(t, l.Check(h))
}

// Conventional partitions are locked: many GPU threads and CPU tasks append
// to a few partitions and every entry arrives whole.
func TestConvConcurrent(t *testing.T) {
	for _, where := range []string{"gpu", "cpu"} {
		t.Run(where, func(t *testing.T) {
			m := newMachine(t)
			l, err := txn.CreateConv(m, "log", 3, 4096)
			require.NoError(t, err)
			const n = 64
			errs := make([]error, n)
			insert := func(x txn.Exec, id int) {
				p, err := l.Part(x)
				if err == nil {
					err = l.Insert(x, p, []byte(fmt.Sprintf("entry-%03d", id)))
				}
				errs[id] = err
			}
			if where == "gpu" {
				_, err = scope.Launch(m, scope.Grid{Blocks: 2, Threads: n / 2}, func(th *scope.Thread) { insert(txn.GPU(th), th.ID()) })
			} else {
				tasks := make([]coro.Task, n)
				for i := range tasks {
					tasks[i] = func(c *coro.Ctx) { insert(txn.CPU(c), c.ID()) }
				}
				_, err = coro.Run(m, tasks)
			}
			require.NoError(t, err)
			for i, e := range errs {
				require.NoError(t, e, "agent %d", i)
			}
			h := txn.Host(m)
			var all []string
			for p := range l.Parts() {
				es, err := l.Entries(h, p)
				require.NoError(t, err)
				for _, e := range es {
					all = append(all, string(e))
				}
			}
			slices.Sort(all)
			require.Len(t, all, n)
			for i, e := range all {
				require.Equal(t, fmt.Sprintf("entry-%03d", i), e)
			}
			require.NoError(t, l.Check(h))
			require.NoError(t, l.Close(m))
		})
	}
}

func reopen(t testing.TB, img *pm.Image) *pm.Machine {
	m, err := pm.Reopen(img, newBackend())
	require.NoError(t, err)
	return m
}
