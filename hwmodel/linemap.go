package hwmodel

// lineMap maps cache lines to values kept in one dense slice, so a caller
// that reads a line's value and then updates it pays one hash lookup, not
// two (the CPU model does so for every CLWB and every persist record).
// Slots are handed out in the order lines are first seen.
type lineMap[V any] struct {
	idx  map[uint64]int32
	vals []V
}

func newLineMap[V any]() *lineMap[V] { return &lineMap[V]{idx: map[uint64]int32{}} }

// find returns line's slot, or -1 if it has none.
func (m *lineMap[V]) find(line uint64) int32 {
	if i, ok := m.idx[line]; ok {
		return i
	}
	return -1
}

// slot returns line's slot, giving it a zero value first if it has none,
// and whether it had one.
func (m *lineMap[V]) slot(line uint64) (int32, bool) {
	if i, ok := m.idx[line]; ok {
		return i, true
	}
	var zero V
	m.vals = append(m.vals, zero)
	i := int32(len(m.vals) - 1)
	m.idx[line] = i
	return i, false
}

// at returns slot i's value; it stays valid until the next slot call.
func (m *lineMap[V]) at(i int32) *V { return &m.vals[i] }

// reset forgets every line.
func (m *lineMap[V]) reset() {
	clear(m.idx)
	clear(m.vals)
	m.vals = m.vals[:0]
}
