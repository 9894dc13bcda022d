package pm_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
)

// hostWrite is a write of data at off in a PM region, or in a volatile
// range if vol.
type hostWrite struct {
	vol  bool
	off  uint64
	data string
}

// copyInCases are lists of writes at offsets of a 64-byte PM region (v:
// of a 64-byte volatile range), in order; later writes may overlap earlier
// ones.
var copyInCases = []struct {
	name   string
	writes []hostWrite
}{
	{"none", nil},
	{"one", []hostWrite{{false, 0, "hello"}}},
	{"disjoint", []hostWrite{{false, 0, "ab"}, {false, 10, "cd"}, {false, 60, "wxyz"}}},
	{"overlapping", []hostWrite{{false, 4, "aaaaaaaa"}, {false, 6, "bb"}, {false, 3, "c"}, {false, 4, "dddd"}}},
	{"adjacent", []hostWrite{{false, 8, "12345678"}, {false, 16, "abcdefgh"}}},
	{"empty data", []hostWrite{{false, 8, ""}, {false, 8, "x"}}},
	{"volatile and pm", []hostWrite{{true, 0, "vvvv"}, {false, 0, "pppp"}, {true, 2, "ww"}}},
}

// CopyInMany leaves the image single CopyIns leave, write by write.
func TestCopyInManyMatchesCopyIn(t *testing.T) {
	for _, tc := range copyInCases {
		t.Run(tc.name, func(t *testing.T) {
			var imgs [2][2][]byte
			for k, many := range []bool{false, true} {
				m := newMachine(t)
				r, err := m.CreateRegion("r", 64)
				require.NoError(t, err)
				v, err := m.Alloc(pm.HostMem, 64)
				require.NoError(t, err)
				var ws []pm.Write
				for _, w := range tc.writes {
					a := r.Base.Add(w.off)
					if w.vol {
						a = v.Add(w.off)
					}
					ws = append(ws, pm.Write{Addr: a, Data: []byte(w.data)})
				}
				if many {
					require.NoError(t, m.CopyInMany(ws))
				} else {
					for _, w := range ws {
						require.NoError(t, m.CopyIn(w.Addr, w.Data))
					}
				}
				imgs[k][0], imgs[k][1] = make([]byte, 64), make([]byte, 64)
				require.NoError(t, m.CopyOut(r.Base, imgs[k][0]))
				require.NoError(t, m.CopyOut(v, imgs[k][1]))
			}
			require.Equal(t, imgs[0], imgs[1])
		})
	}
}

// A bad address anywhere in the list fails the call, naming the write,
// before anything is written.
func TestCopyInManyBadAddress(t *testing.T) {
	m := newMachine(t)
	r, err := m.CreateRegion("r", 64)
	require.NoError(t, err)
	good := pm.Write{Addr: r.Base, Data: []byte("good")}
	for _, tc := range []struct {
		name string
		bad  pm.Write
		err  error
	}{
		{"unmapped", pm.Write{Addr: pm.Addr(7) << pm.OffsetBits, Data: []byte("x")}, pm.ErrUnmapped},
		{"past the end", pm.Write{Addr: r.Base.Add(60), Data: []byte("12345")}, pm.ErrOutOfRange},
		{"address 0", pm.Write{Addr: 0, Data: []byte("x")}, pm.ErrUnmapped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := m.CopyInMany([]pm.Write{good, tc.bad, good})
			require.ErrorIs(t, err, tc.err)
			require.ErrorContains(t, err, "write 1 of 3")
			buf := make([]byte, 64)
			require.NoError(t, m.CopyOut(r.Base, buf))
			require.Equal(t, make([]byte, 64), buf, "nothing written")
		})
	}
	_, err = m.Crash()
	require.NoError(t, err)
	require.ErrorIs(t, m.CopyInMany([]pm.Write{good}), pm.ErrCrashed)
}

// The writes reach the crash image in order (functional: every write
// durable).
func TestCopyInManyDurable(t *testing.T) {
	m := newMachine(t)
	r, err := m.CreateRegion("r", 16)
	require.NoError(t, err)
	require.NoError(t, m.CopyInMany([]pm.Write{{Addr: r.Base, Data: []byte("aaaa")}, {Addr: r.Base.Add(2), Data: []byte("bb")}}))
	img, err := m.Crash()
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(img.Regions[0].Data, []byte("aabb")))
}
