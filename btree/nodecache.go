package btree

// nodeCache holds decoded committed nodes for the DB's write path
// (insertHost): planning's descent and the commit walk take a node from it
// instead of reading and checksumming it again. A node enters it only
// after a checked read (decodeNodeInto); the commit walk adds the nodes a
// batch made and drops those it freed, and the leaf chain drops a leaf
// whose next word it rewrites. The cache holds for the committed batch
// seq only: a commit by any other path (Delete, InsertBatch, Recover), or
// an error in insertHost, leaves seq behind and the next insertHost starts
// it empty. Reads that must see the image (Get, Scan, Check, recovery)
// never use it.
type nodeCache struct {
	on   bool   // insertHost is running: planPaths and changes use the cache
	ok   bool   // the cache holds nodes of batch seq
	seq  uint64 // the committed batch the cache holds nodes of
	m    map[uint32]*node
	slab []node   // room for entries (add)
	area []uint64 // room for their keys and values
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
		t.nc = &nodeCache{m: make(map[uint32]*node)}
	}
	c := t.nc
	if !c.ok || c.seq != t.cur.seq {
		clear(c.m)
	}
	c.on, c.ok, c.seq = true, true, t.cur.seq
	return func(ok bool) {
		c.on, c.ok, c.seq = false, ok, t.cur.seq
		if !ok {
			clear(c.m)
		}
	}
}

// get returns node id if c (which may be nil) holds it.
func (c *nodeCache) get(id uint32) (*node, bool) {
	if c == nil {
		return nil, false
	}
	nd, ok := c.m[id]
	return nd, ok
}

// read reads node id (checked) into a new entry of the cache, through b
// (nodeBytes long), and returns it.
func (c *nodeCache) read(t *Tree, id uint32, b []byte) (*node, error) {
	order := t.g.order
	if len(c.slab) == 0 {
		c.slab, c.area = make([]node, 64), make([]uint64, 2*order*64)
	}
	nd := &c.slab[0]
	nd.keys, nd.vals = c.area[:0:order], c.area[order:order:2*order]
	if err := t.readNodeInto(id, b, nd); err != nil {
		return nil, err
	}
	c.slab, c.area = c.slab[1:], c.area[2*order:]
	c.m[id] = nd
	return nd, nil
}
