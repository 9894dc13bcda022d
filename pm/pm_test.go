package pm_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/functional"
)

func newMachine(t testing.TB) *pm.Machine {
	t.Helper()
	m, err := pm.NewMachine(functional.New(pm.GPULimits{}))
	require.NoError(t, err)
	return m
}

func TestRegions(t *testing.T) {
	m := newMachine(t)
	a, err := m.CreateRegion("alpha", 100)
	require.NoError(t, err)
	b, err := m.CreateRegion("beta", 64)
	require.NoError(t, err)
	require.NotEqual(t, a.Base, b.Base)
	require.Equal(t, pm.PMem, a.Kind)

	for _, tc := range []struct {
		name string
		size uint64
		err  error
	}{
		{"alpha", 8, pm.ErrRegionExists},
		{"", 8, pm.ErrBadName},
		{"a/b", 8, pm.ErrBadName},
		{"nul\x00", 8, pm.ErrBadName},
		{string(make([]byte, 256)), 8, pm.ErrBadName},
		{"zero", 0, pm.ErrBadSize},
		{"huge", pm.MaxRangeSize + 1, pm.ErrBadSize},
	} {
		_, err := m.CreateRegion(tc.name, tc.size)
		require.ErrorIs(t, err, tc.err, "%q", tc.name)
	}
	got, err := m.OpenRegion("beta")
	require.NoError(t, err)
	require.Equal(t, b, got)
	_, err = m.OpenRegion("gamma")
	require.ErrorIs(t, err, pm.ErrNoRegion)
	require.Equal(t, []pm.Range{a, b}, m.Regions())

	require.NoError(t, m.RemoveRegion("alpha"))
	require.ErrorIs(t, m.RemoveRegion("alpha"), pm.ErrNoRegion)
	require.Equal(t, []pm.Range{b}, m.Regions())
	_, err = m.Memory().Load(a.Base, 8)
	require.ErrorIs(t, err, pm.ErrUnmapped)
	// The name and the freed range index can be reused; the new region is
	// zero-filled.
	require.NoError(t, m.CopyIn(b.Base, []byte{7}))
	c, err := m.CreateRegion("alpha", 8)
	require.NoError(t, err)
	require.Equal(t, a.Base, c.Base, "lowest free index first")
	v, err := m.Memory().Load(c.Base, 8)
	require.NoError(t, err)
	require.Zero(t, v)
}

func TestAccessErrors(t *testing.T) {
	m := newMachine(t)
	r, err := m.CreateRegion("r", 64)
	require.NoError(t, err)
	mem := m.Memory()
	for _, tc := range []struct {
		name string
		addr pm.Addr
		size uint64
		err  error
	}{
		{"ok-first", r.Base, 8, nil},
		{"ok-last", r.Base.Add(56), 8, nil},
		{"ok-byte", r.Base.Add(63), 1, nil},
		{"past-end", r.Base.Add(64), 1, pm.ErrOutOfRange},
		{"straddles-end", r.Base.Add(60), 8, pm.ErrOutOfRange},
		{"misaligned-8", r.Base.Add(4), 8, pm.ErrMisaligned},
		{"misaligned-2", r.Base.Add(1), 2, pm.ErrMisaligned},
		{"null", 0, 4, pm.ErrUnmapped},
		{"no-range", pm.Addr(99 << pm.OffsetBits), 4, pm.ErrUnmapped},
		{"bad-size", r.Base, 3, pm.ErrBadSize},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := mem.Store(tc.addr, tc.size, 0x1122334455667788)
			require.ErrorIs(t, err, tc.err)
			v, err := mem.Load(tc.addr, tc.size)
			require.ErrorIs(t, err, tc.err)
			if tc.err == nil {
				require.Equal(t, uint64(0x1122334455667788)&(1<<(8*tc.size)-1), v)
			}
		})
	}
	require.ErrorIs(t, m.CopyIn(r.Base.Add(60), make([]byte, 5)), pm.ErrOutOfRange)
	require.ErrorIs(t, m.CopyOut(r.Base.Add(60), make([]byte, 5)), pm.ErrOutOfRange)
}

func TestAllocFree(t *testing.T) {
	m := newMachine(t)
	d, err := m.Alloc(pm.DeviceMem, 128)
	require.NoError(t, err)
	h, err := m.Alloc(pm.HostMem, 128)
	require.NoError(t, err)
	_, err = m.Alloc(pm.PMem, 8)
	require.ErrorIs(t, err, pm.ErrNotVolatile)
	_, err = m.Alloc(pm.DeviceMem, 0)
	require.ErrorIs(t, err, pm.ErrBadSize)
	r, err := m.CreateRegion("r", 8)
	require.NoError(t, err)
	require.ErrorIs(t, m.Free(r.Base), pm.ErrNotVolatile)
	require.ErrorIs(t, m.Free(d.Add(8)), pm.ErrNotVolatile)
	require.NoError(t, m.Free(d))
	require.ErrorIs(t, m.Free(d), pm.ErrUnmapped)
	rg, err := m.Memory().Lookup(h.Add(5))
	require.NoError(t, err)
	require.Equal(t, pm.HostMem, rg.Kind)
}

func TestCrashKeepsOnlyPM(t *testing.T) {
	m := newMachine(t)
	r, err := m.CreateRegion("keep", 16)
	require.NoError(t, err)
	v, err := m.Alloc(pm.HostMem, 16)
	require.NoError(t, err)
	require.NoError(t, m.CopyIn(r.Base, []byte("persistent bytes")))
	require.NoError(t, m.CopyIn(v, []byte("volatile  bytes!")))
	img, err := m.Crash()
	require.NoError(t, err)
	require.ErrorIs(t, m.CopyIn(r.Base, []byte("x")), pm.ErrCrashed)
	_, err = m.Crash()
	require.ErrorIs(t, err, pm.ErrCrashed)
	require.Len(t, img.Regions, 1)

	m2, err := pm.Reopen(img, functional.New(pm.GPULimits{}))
	require.NoError(t, err)
	r2, err := m2.OpenRegion("keep")
	require.NoError(t, err)
	require.Equal(t, r, r2)
	buf := make([]byte, 16)
	require.NoError(t, m2.CopyOut(r2.Base, buf))
	require.Equal(t, "persistent bytes", string(buf))
	// New allocations never collide with a reopened region.
	n, err := m2.Alloc(pm.DeviceMem, 8)
	require.NoError(t, err)
	require.NotEqual(t, r2.Base, n)
}

func TestImageRoundTrip(t *testing.T) {
	m := newMachine(t)
	for i, name := range []string{"b", "a", "c"} {
		r, err := m.CreateRegion(name, uint64(8*(i+1)))
		require.NoError(t, err)
		require.NoError(t, m.CopyIn(r.Base, bytes.Repeat([]byte{byte(i + 1)}, 8*(i+1))))
	}
	img, err := m.Crash()
	require.NoError(t, err)
	require.Equal(t, "a", img.Regions[0].Name)
	enc, err := img.MarshalBinary()
	require.NoError(t, err)
	var back pm.Image
	require.NoError(t, back.UnmarshalBinary(enc))
	require.True(t, img.Equal(&back))

	// Every single-byte corruption and every truncation is an error.
	for i := range enc {
		bad := bytes.Clone(enc)
		bad[i] ^= 0x40
		require.ErrorIs(t, new(pm.Image).UnmarshalBinary(bad), pm.ErrCorrupt, "flip at %d", i)
	}
	for n := range len(enc) {
		require.ErrorIs(t, new(pm.Image).UnmarshalBinary(enc[:n]), pm.ErrCorrupt, "truncated to %d", n)
	}

	cl := img.Clone()
	rb, ok := cl.Region("b")
	require.True(t, ok)
	require.NoError(t, cl.Write(rb.Base.Add(2), []byte{9, 9}))
	require.False(t, img.Equal(cl))
	require.ErrorIs(t, cl.Write(rb.Base.Add(15), []byte{1, 2}), pm.ErrOutOfRange)
	require.ErrorIs(t, cl.Write(pm.Addr(77<<pm.OffsetBits), []byte{1}), pm.ErrUnmapped)
}

func FuzzImageDecode(f *testing.F) {
	img := &pm.Image{Regions: []pm.RegionImage{{Name: "r", Base: 1 << pm.OffsetBits, Data: []byte("12345678")}}}
	enc, err := img.MarshalBinary()
	require.NoError(f, err)
	f.Add(enc)
	f.Add([]byte("SCPMIMG\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var got pm.Image
		if err := got.UnmarshalBinary(data); err != nil {
			require.ErrorIs(t, err, pm.ErrCorrupt)
			return
		}
		// Whatever decodes re-encodes to the same bytes and reopens.
		again, err := got.MarshalBinary()
		require.NoError(t, err)
		require.Equal(t, data, again)
		_, err = pm.Reopen(&got, functional.New(pm.GPULimits{}))
		require.NoError(t, err)
	})
}

func TestScope(t *testing.T) {
	a := &pm.Agent{Kind: pm.GPUThread, ID: 1, Block: 0, Warp: 0}
	b := &pm.Agent{Kind: pm.GPUThread, ID: 40, Block: 0, Warp: 1}
	c := &pm.Agent{Kind: pm.GPUThread, ID: 600, Block: 2, Warp: 18}
	cpu := &pm.Agent{Kind: pm.CPUTask, ID: 1}
	for _, tc := range []struct {
		s    pm.Scope
		x, y *pm.Agent
		want bool
	}{
		{pm.Thread, a, a, true}, {pm.Thread, a, b, false}, {pm.Thread, a, cpu, false},
		{pm.Warp, a, b, false}, {pm.Block, a, b, true}, {pm.Block, a, c, false},
		{pm.Device, a, c, true}, {pm.Device, a, cpu, false}, {pm.System, a, cpu, true},
	} {
		require.Equal(t, tc.want, tc.s.Covers(tc.x, tc.y), "%v covers %v and %v", tc.s, tc.x, tc.y)
	}
	for s := pm.Thread; s <= pm.System; s++ {
		p, err := pm.ParseScope(s.String())
		require.NoError(t, err)
		require.Equal(t, s, p)
	}
	_, err := pm.ParseScope("galaxy")
	require.Error(t, err)
	require.Equal(t, "scope(9)", pm.Scope(9).String())
}
