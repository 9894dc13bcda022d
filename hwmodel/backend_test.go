package hwmodel

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/functional"
	"github.com/scopedpm/scopedpm/scope"
)

// kernelCase is a kernel with its setup; out lists the volatile ranges
// whose contents the metamorphic test compares (PM is compared whole).
type kernelCase struct {
	name  string
	setup func(t testing.TB, m *pm.Machine) (scope.Grid, scope.Kernel, []outRange)
}

type outRange struct {
	a pm.Addr
	n int
}

func putU32s(t testing.TB, m *pm.Machine, a pm.Addr, vs []uint32) {
	t.Helper()
	buf := make([]byte, 4*len(vs))
	for i, v := range vs {
		binary.LittleEndian.PutUint32(buf[4*i:], v)
	}
	require.NoError(t, m.CopyIn(a, buf))
}

func alloc(t testing.TB, m *pm.Machine, n uint64) pm.Addr {
	t.Helper()
	a, err := m.Alloc(pm.DeviceMem, n)
	require.NoError(t, err)
	return a
}

func region(t testing.TB, m *pm.Machine, name string, n uint64) pm.Range {
	t.Helper()
	r, err := m.CreateRegion(name, n)
	require.NoError(t, err)
	return r
}

// The kernels of the foundation's engine tests, plus kernels that use every
// persistency verb.
var kernels = []kernelCase{
	{"vector-add", func(t testing.TB, m *pm.Machine) (scope.Grid, scope.Kernel, []outRange) {
		const n, bs = 1000, 96
		a, b := alloc(t, m, 4*n), alloc(t, m, 4*n)
		c := region(t, m, "c", 4*n)
		av, bv := make([]uint32, n), make([]uint32, n)
		for i := range n {
			av[i], bv[i] = uint32(i), uint32(3*i+1)
		}
		putU32s(t, m, a, av)
		putU32s(t, m, b, bv)
		return scope.Grid{Blocks: (n + bs - 1) / bs, Threads: bs}, func(t *scope.Thread) {
			i := t.ID()
			if i >= n {
				return
			}
			off := uint64(4 * i)
			t.Store32(c.Base.Add(off), t.Load32(a.Add(off))+t.Load32(b.Add(off)))
		}, nil
	}},
	{"block-reduction", func(t testing.TB, m *pm.Machine) (scope.Grid, scope.Kernel, []outRange) {
		const blocks, bs = 7, 128
		in, scratch := alloc(t, m, 4*blocks*bs), alloc(t, m, 4*blocks*bs)
		out := region(t, m, "sums", 4*blocks)
		vals := make([]uint32, blocks*bs)
		for i := range vals {
			vals[i] = uint32(i*7 + 3)
		}
		putU32s(t, m, in, vals)
		return scope.Grid{Blocks: blocks, Threads: bs}, func(t *scope.Thread) {
			base := scratch.Add(uint64(4 * t.Block() * bs))
			me := base.Add(uint64(4 * t.TID()))
			t.Store32(me, t.Load32(in.Add(uint64(4*t.ID()))))
			t.SyncThreads()
			for s := bs / 2; s > 0; s /= 2 {
				if t.TID() < s {
					t.Store32(me, t.Load32(me)+t.Load32(base.Add(uint64(4*(t.TID()+s)))))
				}
				t.SyncThreads()
			}
			if t.TID() == 0 {
				t.Store32(out.Base.Add(uint64(4*t.Block())), t.Load32(base))
			}
		}, []outRange{{scratch, 4 * blocks * bs}}
	}},
	{"producer-consumer", func(t testing.TB, m *pm.Machine) (scope.Grid, scope.Kernel, []outRange) {
		data := region(t, m, "data", 4*64)
		flag := alloc(t, m, 4)
		out := alloc(t, m, 4*64)
		return scope.Grid{Blocks: 2, Threads: 64}, func(t *scope.Thread) {
			if t.Block() == 1 {
				t.Store32(data.Base.Add(uint64(4*t.TID())), uint32(100+t.TID()))
				t.SyncThreads()
				if t.TID() == 0 {
					t.PRel(flag, 1, pm.Device)
				}
				return
			}
			for t.PAcq(flag, pm.Device) == 0 {
			}
			t.Store32(out.Add(uint64(4*t.TID())), t.Load32(data.Base.Add(uint64(4*t.TID()))))
		}, []outRange{{out, 4 * 64}}
	}},
	{"undo-log", func(t testing.TB, m *pm.Machine) (scope.Grid, scope.Kernel, []outRange) {
		// Each thread logs the old value, orders, updates in place, makes it
		// durable, then commits: every intra-thread verb.
		const n = 256
		data := region(t, m, "data", 8*n)
		log := region(t, m, "log", 16*n)
		return scope.Grid{Blocks: 4, Threads: n / 4}, func(t *scope.Thread) {
			i := uint64(t.ID())
			d := data.Base.Add(8 * i)
			old := t.Load64(d)
			t.Store64(log.Base.Add(16*i), old)
			t.OFence()
			t.Store64(d, old+i*i+1)
			t.DFence()
			t.Store64(log.Base.Add(16*i+8), 1)
			t.EpochBarrier()
		}, nil
	}},
	{"scoped-pbarrier", func(t testing.TB, m *pm.Machine) (scope.Grid, scope.Kernel, []outRange) {
		// Block-scoped release/acquire and persist barriers of every scope,
		// atomics on PM and byte-slice persists across lines.
		const blocks, bs = 3, 64
		cnt := region(t, m, "cnt", 8*blocks)
		rows := region(t, m, "rows", 512*blocks)
		flags := alloc(t, m, 4*blocks)
		return scope.Grid{Blocks: blocks, Threads: bs}, func(t *scope.Thread) {
			blk := uint64(t.Block())
			t.AtomicAdd64(cnt.Base.Add(8*blk), uint64(t.TID()+1), pm.Device)
			t.PBarrier(pm.Block)
			if t.TID() == 0 {
				buf := make([]byte, 200)
				for i := range buf {
					buf[i] = byte(int(blk)*7 + i)
				}
				t.StoreBytes(rows.Base.Add(512*blk+100), buf)
				t.PRel(flags.Add(4*blk), 1, pm.Block)
			}
			if t.TID() == 33 {
				for t.PAcq(flags.Add(4*blk), pm.Block) == 0 {
				}
				t.Store32(rows.Base.Add(512*blk+400), uint32(t.Load64(cnt.Base.Add(8*blk))))
			}
			t.PBarrier(pm.Thread)
			t.Fence(pm.Device)
			t.Work(10)
			t.PBarrier(pm.Device)
			if t.TID() == 1 {
				t.Store8(rows.Base.Add(512*blk), 9)
			}
		}, nil
	}},
}

// capture returns the volatile outputs and the durable image after a run.
func capture(t testing.TB, m *pm.Machine, outs []outRange) ([][]byte, *pm.Image, []byte) {
	t.Helper()
	var vs [][]byte
	for _, o := range outs {
		buf := make([]byte, o.n)
		require.NoError(t, m.CopyOut(o.a, buf))
		vs = append(vs, buf)
	}
	var visible []byte
	for _, r := range m.Regions() {
		buf := make([]byte, r.Size)
		require.NoError(t, m.CopyOut(r.Base, buf))
		visible = append(visible, buf...)
	}
	img, err := m.Crash()
	require.NoError(t, err)
	return vs, img, visible
}

func runKernel(t testing.TB, be pm.Backend, kc kernelCase) (scope.Result, [][]byte, *pm.Image, []byte) {
	t.Helper()
	m, err := pm.NewMachine(be)
	require.NoError(t, err)
	g, k, outs := kc.setup(t, m)
	res, err := scope.Launch(m, g, k, scope.WithName(kc.name))
	require.NoError(t, err)
	vs, img, vis := capture(t, m, outs)
	return res, vs, img, vis
}

func TestMetamorphic(t *testing.T) {
	for _, kc := range kernels {
		_, wantOut, wantImg, wantVis := runKernel(t, functional.New(pm.DefaultGPU()), kc)
		for _, preset := range Presets() {
			if preset == "h100" && testing.Short() {
				continue // a 50 MB L2 per backend: minutes under the race detector; runs without -short
			}
			cfg, err := Preset(preset)
			require.NoError(t, err)
			for _, model := range cfg.Models() {
				t.Run(fmt.Sprintf("%s/%s/%s", kc.name, preset, model), func(t *testing.T) {
					be, err := New(cfg, model)
					require.NoError(t, err)
					res, out, img, vis := runKernel(t, be, kc)
					require.Equal(t, wantOut, out, "volatile outputs")
					require.Equal(t, wantVis, vis, "visible PM")
					require.True(t, wantImg.Equal(img), "durable image after the launch")
					require.Greater(t, res.Stats.Cycles, uint64(0))
				})
			}
		}
	}
}

func TestDeterminism(t *testing.T) {
	for _, model := range Models() {
		t.Run(model.String(), func(t *testing.T) {
			run := func() (Stats, []Event, *pm.Image) {
				be, err := New(PresetPMFar(), model)
				require.NoError(t, err)
				var evs []Event
				be.SetTrace(func(e Event) { evs = append(evs, e) })
				m, err := pm.NewMachine(be)
				require.NoError(t, err)
				for _, kc := range kernels {
					g, k, _ := kc.setup(t, m)
					_, err := scope.Launch(m, g, k)
					require.NoError(t, err)
					// Regions are named per kernel; remove them so the next setup can reuse names.
					for _, r := range m.Regions() {
						require.NoError(t, m.RemoveRegion(r.Name))
					}
				}
				img, err := be.CrashAt(be.Now())
				require.NoError(t, err)
				return be.Stats(), evs, img
			}
			s1, e1, i1 := run()
			s2, e2, i2 := run()
			require.Equal(t, s1, s2)
			require.Equal(t, e1, e2)
			require.True(t, i1.Equal(i2))
			require.Equal(t, uint64(len(kernels)), s1.Launches)
		})
	}
}

// A backend that keeps no durable image (KeepNoImage) times every kernel
// as one that keeps it does: the same statistics, trace and durability
// records (addresses, sizes, cycles), under every model on the pm-near
// and gope machines; only its crash images are refused (ErrNoImage), and
// asking for it once attached is an ErrState.
func TestKeepNoImage(t *testing.T) {
	type durRec struct {
		a    pm.Addr
		size int
		ack  uint64
	}
	for _, preset := range []string{"pm-near", "gope"} {
		cfg, err := Preset(preset)
		require.NoError(t, err)
		for _, model := range cfg.Models() {
			t.Run(preset+"/"+model.String(), func(t *testing.T) {
				run := func(noImage bool) (Stats, []Event, []durRec, *Backend) {
					be, err := New(cfg, model)
					require.NoError(t, err)
					if noImage {
						require.NoError(t, be.KeepNoImage())
					}
					var evs []Event
					be.SetTrace(func(e Event) { evs = append(evs, e) })
					m, err := pm.NewMachine(be)
					require.NoError(t, err)
					var durs []durRec
					for _, kc := range kernels {
						g, k, _ := kc.setup(t, m)
						_, err := scope.Launch(m, g, k)
						require.NoError(t, err)
						be.Durability(func(a pm.Addr, size int, ack uint64) { durs = append(durs, durRec{a, size, ack}) })
						for _, r := range m.Regions() {
							require.NoError(t, m.RemoveRegion(r.Name))
						}
					}
					return be.Stats(), evs, durs, be
				}
				s1, e1, d1, be1 := run(false)
				s2, e2, d2, be2 := run(true)
				require.Equal(t, s1, s2)
				require.Equal(t, e1, e2)
				require.Equal(t, d1, d2)
				require.NotEmpty(t, d1, "the kernels persist")
				_, err := be1.CrashAt(be1.Now())
				require.NoError(t, err)
				_, err = be2.CrashAt(be2.Now())
				require.ErrorIs(t, err, ErrNoImage)
				_, err = be2.Crash()
				require.ErrorIs(t, err, ErrNoImage)
				require.ErrorIs(t, be2.KeepNoImage(), ErrState)
			})
		}
	}
}
