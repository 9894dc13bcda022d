package scope

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
)

// opRecorder is a backend that keeps the last op it was handed.
type opRecorder struct {
	pm.Backend // only Op is called
	got        pm.Op
}

func (r *opRecorder) Op(_ *pm.Agent, op *pm.Op) { r.got = *op }

// callOp fills the engine's scratch pm.Op field by field (a whole-struct
// assignment cost a write barrier a verb): every field must be set, so a
// field added to pm.Op and not to callOp shows here as a value left over
// from the verb before.
func TestCallOpSetsEveryField(t *testing.T) {
	rec := &opRecorder{}
	e := &engine{be: rec}
	v := reflect.ValueOf(&e.callScratch).Elem()
	for i := range v.NumField() {
		switch f := v.Field(i); f.Kind() {
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			f.SetUint(9)
		case reflect.Slice:
			f.Set(reflect.ValueOf([]byte{9}))
		default:
			t.Fatalf("pm.Op.%s is a %s: fill it here", v.Type().Field(i).Name, f.Kind())
		}
	}
	for _, c := range []struct {
		verb verbRec
		data []byte
		want pm.Op
	}{
		{verbRec{Kind: pm.OpStore, Size: 4, Addr: 64, Value: 7}, nil, pm.Op{Kind: pm.OpStore, Size: 4, Addr: 64, Value: 7}},
		{verbRec{Kind: pm.OpLoad, Space: space{PM: true}, Size: 2, Addr: 8, HasData: true, Gather: true}, []byte{1, 2},
			pm.Op{Kind: pm.OpLoad, PM: true, Size: 2, Addr: 8, Gather: true, Data: []byte{1, 2}}},
		{verbRec{Kind: pm.OpAtomic, Scope: pm.Device, Wrote: true, Space: space{Shared: true}, Size: 8, Addr: 16, Value: 3, Old: 2}, nil,
			pm.Op{Kind: pm.OpAtomic, Scope: pm.Device, Wrote: true, Shared: true, Size: 8, Addr: 16, Value: 3, Old: 2}},
		{verbRec{Kind: pm.OpStore, WT: true, Size: 4, Addr: 32, Value: 1}, nil, pm.Op{Kind: pm.OpStore, WT: true, Size: 4, Addr: 32, Value: 1}},
	} {
		e.callOp(&pm.Agent{}, &c.verb, c.data)
		require.Equal(t, c.want, rec.got)
		require.Nil(t, e.callScratch.Data, "the scratch keeps no data after the call")
	}
}
