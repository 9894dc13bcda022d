package pm_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
)

func TestSplit(t *testing.T) {
	base := pm.Addr(1 << pm.OffsetBits)
	type rec struct {
		off  uint64
		data string
	}
	for _, tc := range []struct {
		name string
		op   pm.Op
		want []rec
	}{
		{"volatile", pm.Op{Kind: pm.OpStore, Size: 8, Addr: base, Value: 1}, nil},
		{"load", pm.Op{Kind: pm.OpLoad, PM: true, Size: 8, Addr: base}, nil},
		{"u32", pm.Op{Kind: pm.OpStore, PM: true, Size: 4, Addr: base + 4, Value: 0x64636261}, []rec{{4, "abcd"}}},
		{"failed-cas", pm.Op{Kind: pm.OpAtomic, PM: true, Size: 8, Addr: base, Value: 7}, nil},
		{"cas", pm.Op{Kind: pm.OpAtomic, PM: true, Wrote: true, Size: 2, Addr: base + 6, Value: 0x7a79}, []rec{{6, "yz"}}},
		{"prel", pm.Op{Kind: pm.OpPRel, PM: true, Size: 4, Addr: base, Value: 0x31}, []rec{{0, "1\x00\x00\x00"}}},
		{"bytes-unaligned", pm.Op{Kind: pm.OpStore, PM: true, Size: 13, Addr: base + 5, Data: []byte("ABCDEFGHIJKLM")},
			[]rec{{5, "ABC"}, {8, "DEFGHIJK"}, {16, "LM"}}},
		{"bytes-aligned", pm.Op{Kind: pm.OpStore, PM: true, Size: 16, Addr: base + 8, Data: []byte("0123456789abcdef")},
			[]rec{{8, "01234567"}, {16, "89abcdef"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []rec
			tc.op.Split(func(p *pm.Persist) {
				require.Equal(t, (p.Addr)/8, (p.Addr+pm.Addr(p.Size)-1)/8, "record crosses a word")
				got = append(got, rec{uint64(p.Addr - base), string(p.Data())})
			})
			require.Equal(t, tc.want, got)
		})
	}
}
