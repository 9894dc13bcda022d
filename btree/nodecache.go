package btree

import (
	"unsafe"

	"github.com/scopedpm/scopedpm/internal/offheap"
)

// nodeCacheBytes is the memory the node cache may hold, in decoded nodes
// (keys, values, the entry and its pointer; beside them the cache has an
// index of 4 bytes a node of the pool). Pebble, which the DB is measured
// against (bench: btree-vs-pebble), gives its block cache 8 MiB by
// default; half of that here is about 12,000 nodes at the default order:
// room for the decoded tree of some 100,000 random keys, and for what one
// batch of 1,000 keys reads and makes in a tree of any size, all pinned
// while it runs (BenchmarkNodeCache at 65,536 keys: 4,480 entries, 2,755
// nodes cached between batches), so that the next batch's planning finds
// the upper levels, which every batch copies. Unbounded, the cache could
// grow to the whole tree decoded: some 35 MiB at 1M random keys (about
// 105,000 nodes of 350 bytes), beside the node pool itself. The nodes'
// keys and values (two thirds of the bytes at the default order) are in
// mappings off the Go heap (internal/offheap), as Pebble's block cache is:
// on the heap the collector's headroom doubled them in the process's
// resident memory.
const nodeCacheBytes = 4 << 20

// nodeCacheEntries returns the most nodes the cache holds at order.
func nodeCacheEntries(order int) int {
	const ptr = 8 // its pointer in ents
	per := 16*order + int(unsafe.Sizeof(cacheEntry{})) + ptr
	return max(64, nodeCacheBytes/per)
}

// nodeCache holds decoded committed nodes for the DB's write path
// (insertHost): planning's descent and the commit walk take a node from it
// instead of reading and checksumming it again. A committed node enters it
// only after a checked read (decodeNodeInto); a node the running insert
// makes enters it from the entries the insert encodes (fill), so the
// commit walk takes it without reading back the bytes just written; the
// walk drops the nodes the batch freed, and the leaf chain updates a made
// leaf's next word and drops an old leaf whose next word it rewrites. The
// cache holds for the committed batch seq only: a commit by any other path
// (Delete, InsertBatch, Recover), or an error in insertHost, leaves seq
// behind and the next insertHost starts it empty. Reads that must see the image (Get, Scan, Check, recovery)
// never use it.
//
// It holds at most max entries (nodeCacheEntries), allocated as needed in
// chunks and then reused: a node that does not fit evicts one by the clock
// algorithm (a hand over the entries in a fixed order, a second chance for
// a node read since the hand last passed it), so eviction is
// deterministic. An entry handed out or filled during the running insert
// (its epoch is the insert's) is pinned: planning, the staged batch and
// the commit walk hold pointers to it until the insert returns, so it is
// neither evicted nor reused before the next one. When every entry is
// pinned a node is read into memory of its own, not cached.
type nodeCache struct {
	on    bool   // insertHost is running: planPaths and changes use the cache
	ok    bool   // the cache holds nodes of batch seq
	seq   uint64 // the committed batch the cache holds nodes of
	epoch uint64 // the running (or last) insert: entries of this epoch are pinned
	max   int    // the most entries
	// at[id] is 1 + the index in ents of the entry holding node id, 0
	// when none does: a slice over the node pool (4 bytes a node, 1/64
	// of the pool) instead of a map: map lookups and deletes were 15-20%
	// of insertHost's CPU on a tree of 65,536 keys (pprof, planning's own
	// map included).
	at    []int32
	n     int           // live entries
	ents  []*cacheEntry // every entry, in the clock's order
	hand  int           // the clock's hand: the next entry it looks at in ents
	free  []*cacheEntry // entries holding no node, not pinned
	freed []*cacheEntry // entries dropped during the running insert (pinned until its end)
	pins  int           // live entries of the running insert's epoch

	evictions int // nodes the clock evicted (tests)
	uncached  int // nodes read past the cache, every entry pinned (tests)
}

// cacheEntry is a slot of the cache, holding node id when live.
type cacheEntry struct {
	nd    node
	kv    []uint64 // the room of nd's keys and values (2*order words)
	id    uint32
	idx   int32 // its index in ents
	live  bool
	ref   bool   // read since the hand last passed it
	epoch uint64 // the last insert that handed it out or filled it
}

// cached returns the tree's cache while insertHost runs, else nil.
func (t *Tree) cached() *nodeCache {
	if c := t.nc; c != nil && c.on {
		return c
	}
	return nil
}

// useCache turns the cache on for an insertHost, empty unless it holds
// nodes of the committed batch; done turns it off, keeping it only if
// the insert succeeded.
func (t *Tree) useCache() (done func(ok bool)) {
	if t.knobs.noNodeCache {
		return func(bool) {}
	}
	if t.nc == nil {
		n := t.knobs.nodeCacheMax
		if n == 0 {
			n = nodeCacheEntries(t.g.order)
		}
		t.nc = &nodeCache{at: make([]int32, t.g.capacity), max: n}
	}
	c := t.nc
	c.epoch++
	c.pins = 0
	c.free = append(c.free, c.freed...)
	c.freed = c.freed[:0]
	if !c.ok || c.seq != t.cur.seq {
		c.reset()
	}
	c.on, c.ok, c.seq = true, true, t.cur.seq
	return func(ok bool) {
		c.on, c.ok, c.seq = false, ok, t.cur.seq
		if !ok {
			c.reset()
		}
	}
}

// dropScratch releases what the tree keeps between insertHost batches:
// the node cache, the last plan's index of nodes, and the buffers of
// planning, staging and the commit walk. A growth calls it on the tree it
// copies from, which takes no more batches (unless the growth fails; the
// next insertHost then starts them anew), so that the two trees' scratch
// are not held at once. Reads never use any of it.
func (t *Tree) dropScratch() {
	t.nc = nil
	t.planNodes = nodeIndex{}
	t.held, t.wb, t.pieceBuf = nil, nil, nil
	t.stageBuf, t.stageFree = nil, nil
	t.chScratch, t.planScratch = changeScratch{}, planScratch{}
}

// reset empties the cache, keeping its entries' room.
func (c *nodeCache) reset() {
	c.free = c.free[:0]
	c.freed = c.freed[:0]
	for _, e := range c.ents {
		if e.live {
			c.at[e.id] = 0
		}
		e.live, e.ref = false, false
		c.free = append(c.free, e)
	}
	c.pins, c.n = 0, 0
}

// len returns the number of nodes c holds.
func (c *nodeCache) len() int { return c.n }

// entry returns the entry holding node id, if any.
func (c *nodeCache) entry(id uint32) (*cacheEntry, bool) {
	if uint64(id) >= uint64(len(c.at)) || c.at[id] == 0 {
		return nil, false
	}
	return c.ents[c.at[id]-1], true
}

// pin marks e as handed out during the running insert.
func (c *nodeCache) pin(e *cacheEntry) {
	if e.epoch != c.epoch {
		e.epoch = c.epoch
		c.pins++
	}
}

// get returns node id if c (which may be nil) holds it, pinned until the
// running insert returns.
func (c *nodeCache) get(id uint32) (*node, bool) {
	if c == nil {
		return nil, false
	}
	e, ok := c.entry(id)
	if !ok {
		return nil, false
	}
	e.ref = true
	c.pin(e)
	return &e.nd, true
}

// drop removes node id from c (which may be nil), if there: its image
// changes or its id is freed. A node handed out is still the caller's
// until the running insert returns.
func (c *nodeCache) drop(id uint32) {
	if c == nil {
		return
	}
	e, ok := c.entry(id)
	if !ok {
		return
	}
	c.at[id] = 0
	c.n--
	e.live = false
	if e.epoch == c.epoch {
		c.pins--
	}
	e.epoch = c.epoch // not reused before the running insert returns
	c.freed = append(c.freed, e)
}

// slot returns an entry to hold a node, not in the map: a free one, a new
// one while c holds fewer than max, else the clock's victim; nil when every
// entry is pinned.
func (c *nodeCache) slot(order int) *cacheEntry {
	if n := len(c.free); n > 0 {
		e := c.free[n-1]
		c.free = c.free[:n-1]
		return e
	}
	if len(c.ents) < c.max {
		// A chunk of entries: two allocations for up to 64 nodes. The
		// keys and values, most of an entry's bytes, live off the Go
		// heap (see nodeCacheBytes), as long as the chunk does: the
		// entries are the only way to them.
		k := min(64, c.max-len(c.ents))
		es := make([]cacheEntry, k)
		kv := offheap.Words(&es[0], 2*order*k)
		for i := range es {
			e := &es[i]
			e.kv = kv[2*order*i : 2*order*(i+1) : 2*order*(i+1)]
			e.idx = int32(len(c.ents))
			c.ents = append(c.ents, e)
			if i > 0 {
				c.free = append(c.free, e)
			}
		}
		return &es[0]
	}
	if c.pins+len(c.freed) >= len(c.ents) {
		return nil // every entry is pinned
	}
	// Every live entry is in at, every entry not live is in free or
	// freed; at least one live entry is not pinned, so two turns of the
	// hand (the first clearing ref bits) find it.
	for range 2 * len(c.ents) {
		e := c.ents[c.hand]
		c.hand++
		if c.hand == len(c.ents) {
			c.hand = 0
		}
		if !e.live || e.epoch == c.epoch {
			continue
		}
		if e.ref {
			e.ref = false
			continue
		}
		c.at[e.id] = 0
		c.n--
		e.live = false
		c.evictions++
		return e
	}
	return nil
}

// fill puts node id, which the running insert made from es (encoded as
// hostBatch.encode does) into an entry of c (which may be nil), pinned, so
// that the commit walk and later batches take it without reading and
// checking the bytes just written. It does nothing when every entry is
// pinned (the walk then reads the node).
func (c *nodeCache) fill(id uint32, es []entry, leaf bool, next uint32, order int) {
	if c == nil {
		return
	}
	c.drop(id)
	e := c.slot(order)
	if e == nil {
		return
	}
	nd := &e.nd
	nd.leaf, nd.next = leaf, next
	nd.keys, nd.vals = e.kv[:0:order], e.kv[order:order:2*order]
	for i, x := range es {
		if leaf || i > 0 {
			nd.keys = append(nd.keys, x.key)
		}
		nd.vals = append(nd.vals, x.val)
	}
	e.id, e.live, e.ref = id, true, false
	e.epoch = 0
	c.pin(e)
	c.at[id] = e.idx + 1
	c.n++
}

// setNext records that the running insert rewrote the next word of leaf
// id, which it made, if c (which may be nil) holds it.
func (c *nodeCache) setNext(id, next uint32) {
	if c == nil {
		return
	}
	if e, ok := c.entry(id); ok {
		e.nd.next = next
	}
}

// read reads node id (checked) through b (nodeBytes long) into an entry
// of the cache, pinned, replacing the node the cache held as id if any,
// and returns it; into a node of its own when no entry is free.
func (c *nodeCache) read(t *Tree, id uint32, b []byte) (*node, error) {
	order := t.g.order
	c.drop(id)
	e := c.slot(order)
	if e == nil {
		c.uncached++
		nd := &node{}
		if err := t.readNodeInto(id, b, nd); err != nil {
			return nil, err
		}
		return nd, nil
	}
	nd := &e.nd
	nd.keys, nd.vals = e.kv[:0:order], e.kv[order:order:2*order]
	if err := t.readNodeInto(id, b, nd); err != nil {
		e.epoch = c.epoch
		c.freed = append(c.freed, e)
		return nil, err
	}
	e.id, e.live, e.ref = id, true, false
	e.epoch = 0
	c.pin(e)
	c.at[id] = e.idx + 1
	c.n++
	return nd, nil
}
