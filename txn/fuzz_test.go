package txn_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/txn"
)

func FuzzDecodeStream(f *testing.F) {
	f.Add(byte('C'), uint32(0), uint32(0), []byte{}, true)
	f.Add(byte('H'), uint32(3), uint32(7), []byte{1, 0, 0, 0, 9, 9, 9, 9, 0, 0, 0, 0}, false)
	f.Add(byte('C'), uint32(1), uint32(0), make([]byte, 64), true)
	f.Fuzz(func(t *testing.T, kind byte, gen, part uint32, stream []byte, conv bool) {
		unit := 4
		if conv {
			unit = 8
		}
		es, err := txn.DecodeStream(kind, gen, part, stream, unit)
		total := 0
		for _, e := range es {
			total += len(e) + 8
		}
		require.LessOrEqual(t, total, len(stream))
		if err == nil {
			require.Equal(t, len(stream) == 0, len(es) == 0)
		}
		_, _, _, _ = txn.DecodeUndo(stream)
	})
}

// fuzzImage builds a small structure, crashes, and returns the image.
func fuzzImage(f *testing.F, build func(m *pm.Machine)) *pm.Image {
	m, err := pm.NewMachine(newBackend())
	require.NoError(f, err)
	build(m)
	img, err := m.Crash()
	require.NoError(f, err)
	return img
}

// corrupt overwrites the region's bytes at off with data.
func corrupt(img *pm.Image, name string, off uint32, data []byte) *pm.Image {
	img = img.Clone()
	r, _ := img.Region(name)
	o := int(off) % len(r.Data)
	copy(r.Data[o:], data)
	return img
}

func FuzzLogRegion(f *testing.F) {
	build := func(m *pm.Machine) {
		h := txn.Host(m)
		c, err := txn.CreateConv(m, "conv", 2, 256)
		require.NoError(f, err)
		l, err := txn.CreateHCL(m, "hcl", 1, 32, 64)
		require.NoError(f, err)
		cl, err := txn.CreateCPU(m, "cpu", 2, 256)
		require.NoError(f, err)
		d, err := m.CreateRegion("data", 64)
		require.NoError(f, err)
		for _, lg := range []txn.Log{c, l, cl} {
			tx, err := txn.Begin(h, lg, 1)
			require.NoError(f, err)
			require.NoError(f, tx.Add(d.Base, 16))
			require.NoError(f, lg.Insert(h, 0, []byte("x")))
		}
	}
	img := fuzzImage(f, build)
	f.Add(uint32(0), []byte{1})
	f.Add(uint32(128), []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Add(uint32(136), []byte{0x10, 0, 0, 0, 0, 0, 0, 0})
	f.Add(uint32(256), []byte{7, 7, 7})
	f.Add(uint32(560), []byte{0xff, 0xff, 0xff, 0x7f})
	f.Fuzz(func(t *testing.T, off uint32, data []byte) {
		for _, name := range []string{"conv", "hcl", "cpu"} {
			m, err := pm.Reopen(corrupt(img, name, off, data), newBackend())
			require.NoError(t, err)
			h := txn.Host(m)
			var l txn.Log
			switch name {
			case "conv":
				l, err = txn.OpenConv(m, name)
			case "hcl":
				l, err = txn.OpenHCL(m, name)
			default:
				l, err = txn.OpenCPU(m, name)
			}
			if err != nil {
				require.ErrorIs(t, err, txn.ErrCorrupt)
				continue
			}
			_ = l.Check(h)
			for p := 0; p < 2; p++ {
				_, _ = l.Entries(h, p)
				_, _ = l.Read(h, p)
				_, _ = l.Size(h, p)
				_, _ = txn.Recover(h, l, p)
			}
		}
	})
}

func FuzzCheckpointRegion(f *testing.F) {
	img := fuzzImage(f, func(m *pm.Machine) {
		cp, err := txn.CreateCheckpoint(m, "cp", 2, 2, 256)
		require.NoError(f, err)
		h := txn.Host(m)
		a, err := m.Alloc(pm.DeviceMem, 100)
		require.NoError(f, err)
		require.NoError(f, cp.Register(h, 0, a, 100))
		require.NoError(f, cp.Save(h, 0))
		require.NoError(f, cp.Save(h, 0))
		e, err := txn.CreateEST(m, "est", 2)
		require.NoError(f, err)
		require.NoError(f, e.Complete(h, 1, 3))
	})
	f.Add(uint32(0), []byte{1})
	f.Add(uint32(128), []byte{2, 0, 0, 0, 0, 0, 0, 0})
	f.Add(uint32(384), []byte{0xff, 0xff})
	f.Add(uint32(500), []byte{0})
	f.Fuzz(func(t *testing.T, off uint32, data []byte) {
		m, err := pm.Reopen(corrupt(img, "cp", off, data), newBackend())
		require.NoError(t, err)
		h := txn.Host(m)
		if cp, err := txn.OpenCheckpoint(m, "cp"); err == nil {
			_ = cp.Check(h)
			a, err := m.Alloc(pm.DeviceMem, 100)
			require.NoError(t, err)
			if cp.Register(h, 0, a, 100) == nil {
				_ = cp.Restore(h, 0)
				_ = cp.Save(h, 0)
			}
			_ = cp.Restore(h, 1)
		} else {
			require.ErrorIs(t, err, txn.ErrCorrupt)
		}
		m, err = pm.Reopen(corrupt(img, "est", off, data), newBackend())
		require.NoError(t, err)
		if e, err := txn.OpenEST(m, "est"); err == nil {
			_ = e.Check(txn.Host(m))
			_, _ = e.LastAll(txn.Host(m))
		} else {
			require.ErrorIs(t, err, txn.ErrCorrupt)
		}
	})
}
