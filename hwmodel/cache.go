package hwmodel

// cache is the tag store of a set-associative cache with LRU replacement.
// It holds no data (the visible image is pm.Memory); a way may carry the
// index of the persist entry that holds its dirty PM bytes.
//
// Invalidation is by generation: a way is valid only if its generation is
// the cache's current one, so invalidating the whole cache is O(1).
type cache struct {
	sets, assoc int
	lineShift   uint
	setMask     uint64   // sets - 1 when sets is a power of two, else 0
	tag         []uint64 // line number + 1; 0 = empty
	gen         []uint32
	stamp       []uint64 // LRU: larger is more recent
	entry       []int32  // persist entry of a dirty PM line, or -1
	curGen      uint32
	clock       uint64
}

func newCache(c CacheConfig) *cache {
	lines := c.SizeBytes / c.LineBytes
	k := &cache{sets: lines / c.Assoc, assoc: c.Assoc, curGen: 1}
	if k.sets&(k.sets-1) == 0 {
		k.setMask = uint64(k.sets - 1)
	}
	k.tag = make([]uint64, lines)
	k.gen = make([]uint32, lines)
	k.stamp = make([]uint64, lines)
	k.entry = make([]int32, lines)
	for i := range k.entry {
		k.entry[i] = -1
	}
	return k
}

// valid reports whether way w holds a line.
func (k *cache) valid(w int) bool { return k.tag[w] != 0 && k.gen[w] == k.curGen }

// set returns the first way of line's set.
func (k *cache) set(line uint64) int {
	if k.setMask != 0 || k.sets == 1 {
		return int(line&k.setMask) * k.assoc
	}
	return int(line%uint64(k.sets)) * k.assoc
}

// way returns the way holding line, or -1, marking nothing.
func (k *cache) way(line uint64) int {
	base := k.set(line)
	for w := base; w < base+k.assoc; w++ {
		if k.tag[w] == line+1 && k.gen[w] == k.curGen {
			return w
		}
	}
	return -1
}

// has reports whether the cache holds line, marking nothing.
func (k *cache) has(line uint64) bool { return k.way(line) >= 0 }

// lookup returns the way holding line, or -1, and marks it recently used.
func (k *cache) lookup(line uint64) int {
	w := k.way(line)
	if w >= 0 {
		k.clock++
		k.stamp[w] = k.clock
	}
	return w
}

// insert places line in its set and returns its way and the line and entry
// of the valid way it evicted (evicted is false when the way was free).
func (k *cache) insert(line uint64) (way int, victim uint64, victimEntry int32, evicted bool) {
	return k.insertAvoiding(line, nil)
}

// insertAvoiding is insert whose victim is the least recently used way
// whose entry pinned rejects, if there is one (the L1 keeps lines the
// persist buffer still holds rather than stall on their eviction).
func (k *cache) insertAvoiding(line uint64, pinned func(entry int32) bool) (way int, victim uint64, victimEntry int32, evicted bool) {
	base := k.set(line)
	way = -1
	lru := base
	for w := base; w < base+k.assoc; w++ {
		if k.tag[w] == 0 || k.gen[w] != k.curGen {
			way = w
			goto place
		}
		if k.stamp[w] < k.stamp[lru] {
			lru = w
		}
		if (pinned == nil || !pinned(k.entry[w])) && (way < 0 || k.stamp[w] < k.stamp[way]) {
			way = w
		}
	}
	if way < 0 {
		way = lru
	}
	victim, victimEntry, evicted = k.tag[way]-1, k.entry[way], true
place:
	k.clock++
	k.tag[way], k.gen[way], k.stamp[way], k.entry[way] = line+1, k.curGen, k.clock, -1
	return way, victim, victimEntry, evicted
}

// invalidate drops every line. Callers write dirty lines back first.
func (k *cache) invalidate() {
	k.curGen++
	if k.curGen == 0 { // wrapped: clear for real
		clear(k.tag)
		k.curGen = 1
	}
}
