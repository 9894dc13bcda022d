package txn

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/scopedpm/scopedpm/internal/seal"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

// Checkpoint limits.
const (
	MaxGroups      = 1 << 16
	MaxPerGroup    = 1 << 16
	MaxElements    = 1 << 20 // groups × elements per group
	MaxGroupSize   = 1 << 31 // bytes of one copy of a group
	checkpointCopy = 4096    // bytes a serial Save moves per load/store pair
)

// Checkpoint is GPM's double-buffered checkpoint (gpmcp_*): groups of
// registered ranges, each group saved and restored on its own. Every group
// has two copies in PM and an index word naming the consistent one; Save
// writes the other (the working copy) and its metadata, orders them, then
// stores the index word. That one aligned 8-byte persist is the group's
// commit point: a crash before it leaves the old copy consistent, after it
// the new one.
//
// After a crash, the addresses of the registered ranges are lost; the
// program registers its ranges again, in the same order and with the same
// sizes (the checkpoint records the sizes and refuses a different order with
// ErrMismatch), and Restore copies each group's consistent copy back.
//
// Layout of its region, every part aligned to 128 bytes: the header line;
// one line per group (the index word, then per copy its sequence number,
// checksum and length); the registration table (one tagged size word per
// element); then per group two copies of groupSize bytes, each element at
// an offset rounded up to 128.
//
// Register is not safe for concurrent use; Save and Restore of different
// groups may run concurrently.
type Checkpoint struct {
	r        pm.Range
	groups   int
	perGroup int
	gsize    uint64
	groups0  pm.Addr
	elems0   pm.Addr
	data0    pm.Addr
	regs     [][]span
}

func ckptLayout(groups, perGroup int, gsize uint64) (groupsOff, elemsOff, dataOff, size uint64) {
	groupsOff = Line
	elemsOff = groupsOff + uint64(groups)*Line
	dataOff = elemsOff + roundUp(uint64(groups*perGroup)*8, Line)
	return groupsOff, elemsOff, dataOff, dataOff + 2*uint64(groups)*gsize
}

func checkCkptGeometry(groups, perGroup int, gsize uint64) error {
	if groups < 1 || groups > MaxGroups || perGroup < 1 || perGroup > MaxPerGroup || groups*perGroup > MaxElements {
		return fmt.Errorf("%w: %d groups of %d elements", ErrBadArg, groups, perGroup)
	}
	if gsize < 1 || gsize > MaxGroupSize {
		return fmt.Errorf("%w: group size %d (want 1..%d)", ErrBadArg, gsize, MaxGroupSize)
	}
	return nil
}

// CreateCheckpoint creates a checkpoint in a new region called name with
// groups groups of at most perGroup elements and groupSize bytes each
// (rounded up to 128; each element takes its size rounded up to 128).
func CreateCheckpoint(m *pm.Machine, name string, groups, perGroup int, groupSize uint64) (*Checkpoint, error) {
	if err := checkCkptGeometry(groups, perGroup, groupSize); err != nil {
		return nil, err
	}
	groupSize = roundUp(groupSize, Line)
	g0, e0, d0, size := ckptLayout(groups, perGroup, groupSize)
	r, err := createRegion(m, name, size, encodeHeader(magicCkpt, uint64(groups), uint64(perGroup), groupSize, g0, e0, d0, size))
	if err != nil {
		return nil, err
	}
	return newCheckpoint(r, groups, perGroup, groupSize, g0, e0, d0), nil
}

// OpenCheckpoint opens the checkpoint in region name, with no ranges
// registered.
func OpenCheckpoint(m *pm.Machine, name string) (*Checkpoint, error) {
	r, f, err := openRegion(m, name, magicCkpt, 7)
	if err != nil {
		return nil, err
	}
	if f[0] > MaxGroups || f[1] > MaxPerGroup || f[2]%Line != 0 {
		return nil, fmt.Errorf("%w: region %q: checkpoint geometry %v", ErrCorrupt, name, f[:3])
	}
	groups, perGroup, gsize := int(f[0]), int(f[1]), f[2]
	if err := checkCkptGeometry(groups, perGroup, gsize); err != nil {
		return nil, fmt.Errorf("%w: region %q: %w", ErrCorrupt, name, err)
	}
	g0, e0, d0, size := ckptLayout(groups, perGroup, gsize)
	if f[3] != g0 || f[4] != e0 || f[5] != d0 || f[6] != size || size > r.Size {
		return nil, fmt.Errorf("%w: region %q: layout %v disagrees with its geometry or the region's %d bytes", ErrCorrupt, name, f, r.Size)
	}
	return newCheckpoint(r, groups, perGroup, gsize, g0, e0, d0), nil
}

func newCheckpoint(r pm.Range, groups, perGroup int, gsize, g0, e0, d0 uint64) *Checkpoint {
	return &Checkpoint{r: r, groups: groups, perGroup: perGroup, gsize: gsize,
		groups0: r.Base.Add(g0), elems0: r.Base.Add(e0), data0: r.Base.Add(d0), regs: make([][]span, groups)}
}

// Groups returns the number of groups.
func (c *Checkpoint) Groups() int { return c.groups }

// Region returns the checkpoint's PM region.
func (c *Checkpoint) Region() pm.Range { return c.r }

func (c *Checkpoint) indexAddr(g int) pm.Addr { return c.groups0.Add(uint64(g) * Line) }
func (c *Checkpoint) metaAddr(g, cp int) pm.Addr {
	return c.groups0.Add(uint64(g)*Line + 16 + 16*uint64(cp))
}
func (c *Checkpoint) elemAddr(g, i int) pm.Addr {
	return c.elems0.Add(uint64(g*c.perGroup+i) * 8)
}
func (c *Checkpoint) copyAddr(g, cp int) pm.Addr {
	return c.data0.Add(uint64(2*g+cp) * c.gsize)
}

func (c *Checkpoint) checkGroup(x Exec, g int) error {
	if err := checkExec(x); err != nil {
		return err
	}
	if g < 0 || g >= c.groups {
		return fmt.Errorf("%w: group %d of %d", ErrBadArg, g, c.groups)
	}
	return nil
}

// sizes reads the recorded sizes of group g's elements.
func (c *Checkpoint) sizes(x Exec, g int) ([]uint64, error) {
	var out []uint64
	var used uint64
	zero := false
	for i := 0; i < c.perGroup; i++ {
		idx := uint64(g*c.perGroup + i)
		w := x.Load64(c.elemAddr(g, i))
		if err := execErr(x); err != nil {
			return nil, err
		}
		v, err := untag('R', idx, w)
		if err != nil {
			return nil, fmt.Errorf("group %d element %d: %w", g, i, err)
		}
		if v == 0 {
			zero = true
			continue
		}
		if zero {
			return nil, fmt.Errorf("%w: group %d element %d recorded after an empty one", ErrCorrupt, g, i)
		}
		used += roundUp(v, Line)
		if v > c.gsize || used > c.gsize {
			return nil, fmt.Errorf("%w: group %d elements take %d bytes of %d", ErrCorrupt, g, used, c.gsize)
		}
		out = append(out, v)
	}
	return out, nil
}

// Register adds the size bytes at addr as the next element of group g. On a
// new checkpoint it records the size durably; on a reopened one it checks it
// against the size recorded at that position (ErrMismatch).
func (c *Checkpoint) Register(x Exec, g int, addr pm.Addr, size uint64) error {
	if err := c.checkGroup(x, g); err != nil {
		return err
	}
	i := len(c.regs[g])
	if i >= c.perGroup {
		return fmt.Errorf("%w: group %d has %d elements", ErrFull, g, c.perGroup)
	}
	if size == 0 || size > maxTagged {
		return fmt.Errorf("%w: element of %d bytes", ErrBadArg, size)
	}
	rec, err := c.sizes(x, g)
	if err != nil {
		return err
	}
	if i < len(rec) {
		if rec[i] != size {
			return fmt.Errorf("%w: group %d element %d has %d bytes, recorded %d", ErrMismatch, g, i, size, rec[i])
		}
	} else {
		var used uint64
		for _, s := range rec {
			used += roundUp(s, Line)
		}
		if used+roundUp(size, Line) > c.gsize {
			return fmt.Errorf("%w: group %d: %d more bytes after %d of %d", ErrFull, g, size, used, c.gsize)
		}
		x.Store64(c.elemAddr(g, i), tagWord('R', uint64(g*c.perGroup+i), size))
		x.Durable()
		if err := execErr(x); err != nil {
			return err
		}
	}
	c.regs[g] = append(c.regs[g], span{addr, size})
	return nil
}

// registered checks that the registrations of g match the recorded sizes.
func (c *Checkpoint) registered(x Exec, g int) error {
	rec, err := c.sizes(x, g)
	if err != nil {
		return err
	}
	if len(rec) != len(c.regs[g]) {
		return fmt.Errorf("%w: group %d has %d elements registered, %d recorded", ErrMismatch, g, len(c.regs[g]), len(rec))
	}
	return nil
}

// Seq returns group g's number of completed saves (0: never saved); the
// consistent copy is Seq mod 2.
func (c *Checkpoint) Seq(x Exec, g int) (uint64, error) {
	if err := c.checkGroup(x, g); err != nil {
		return 0, err
	}
	w := x.Load64(c.indexAddr(g))
	if err := execErr(x); err != nil {
		return 0, err
	}
	v, err := untag('I', uint64(g), w)
	if err != nil {
		return 0, fmt.Errorf("group %d index: %w", g, err)
	}
	return v, nil
}

func groupCRC(g int, seq uint64) uint32 {
	var b [12]byte
	binary.LittleEndian.PutUint32(b[:], uint32(g))
	binary.LittleEndian.PutUint64(b[4:], seq)
	return seal.Checksum(b[:])
}

// commit writes the metadata of copy seq&1 of g, orders it and the copy
// before the index word, and stores the index word: the commit point.
func (c *Checkpoint) commit(x Exec, g int, seq uint64, sum uint32, n uint64) error {
	cp := int(seq & 1)
	x.Store64(c.metaAddr(g, cp), seq)
	x.Store64(c.metaAddr(g, cp).Add(8), uint64(sum)|n<<32)
	x.Order()
	x.Store64(c.indexAddr(g), tagWord('I', uint64(g), seq))
	x.Durable()
	return execErr(x)
}

// Save checkpoints group g: it copies every registered range of the group
// into the working copy, then switches the index word (see Checkpoint).
func (c *Checkpoint) Save(x Exec, g int) error {
	if err := c.checkGroup(x, g); err != nil {
		return err
	}
	if err := c.registered(x, g); err != nil {
		return err
	}
	seq, err := c.Seq(x, g)
	if err != nil {
		return err
	}
	if seq+1 > maxTagged {
		return fmt.Errorf("%w: group %d saved %d times", ErrFull, g, seq)
	}
	dst := c.copyAddr(g, int((seq+1)&1))
	sum := groupCRC(g, seq+1)
	buf := make([]byte, checkpointCopy)
	var off, n uint64
	for _, s := range c.regs[g] {
		for done := uint64(0); done < s.n; {
			k := min(s.n-done, checkpointCopy)
			x.LoadBytes(s.a.Add(done), buf[:k])
			x.StoreBytes(dst.Add(off+done), buf[:k])
			sum = seal.Update(sum, buf[:k])
			done += k
		}
		off += roundUp(s.n, Line)
		n += s.n
	}
	if err := execErr(x); err != nil {
		return err
	}
	return c.commit(x, g, seq+1, sum, n)
}

// SaveKernel checkpoints group g with GPU kernels on m, as libGPM's
// gpmcp_checkpoint does: a kernel of the given grid copies the group into the
// working copy, one 128-byte line per thread step, and makes its copy
// durable (DFence); then a one-thread kernel checksums the working copy and
// switches the index word.
func (c *Checkpoint) SaveKernel(m *pm.Machine, g int, grid scope.Grid) error {
	h := Host(m)
	if err := c.checkGroup(h, g); err != nil {
		return err
	}
	if err := c.registered(h, g); err != nil {
		return err
	}
	seq, err := c.Seq(h, g)
	if err != nil {
		return err
	}
	type piece struct {
		src, dst pm.Addr
		n        uint64
	}
	dst := c.copyAddr(g, int((seq+1)&1))
	var pieces []piece
	var off, n uint64
	for _, s := range c.regs[g] {
		for done := uint64(0); done < s.n; done += Line {
			pieces = append(pieces, piece{s.a.Add(done), dst.Add(off + done), min(Line, s.n-done)})
		}
		off += roundUp(s.n, Line)
		n += s.n
	}
	var kerr error
	_, err = scope.Launch(m, grid, func(t *scope.Thread) {
		var buf [Line]byte
		for i := t.ID(); i < len(pieces); i += grid.Total() {
			p := pieces[i]
			t.LoadBytes(p.src, buf[:p.n])
			t.StoreBytes(p.dst, buf[:p.n])
		}
		t.DFence()
	}, scope.WithName("txn.checkpoint.copy"))
	if err != nil {
		return err
	}
	_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, func(t *scope.Thread) {
		x := GPU(t)
		sum := groupCRC(g, seq+1)
		var buf [Line]byte
		off := uint64(0)
		for _, s := range c.regs[g] {
			for done := uint64(0); done < s.n; done += Line {
				k := min(Line, s.n-done)
				t.LoadBytes(dst.Add(off+done), buf[:k])
				sum = seal.Update(sum, buf[:k])
			}
			off += roundUp(s.n, Line)
		}
		kerr = c.commit(x, g, seq+1, sum, n)
	}, scope.WithName("txn.checkpoint.commit"))
	if err != nil {
		return err
	}
	return kerr
}

// load reads group g's consistent copy, verified, one buffer per element
// of the recorded sizes.
func (c *Checkpoint) load(x Exec, g int, sizes []uint64) ([][]byte, uint64, error) {
	seq, err := c.Seq(x, g)
	if err != nil {
		return nil, 0, err
	}
	if seq == 0 {
		return nil, 0, fmt.Errorf("%w: group %d", ErrNoCheckpoint, g)
	}
	cp := int(seq & 1)
	ms, mw := x.Load64(c.metaAddr(g, cp)), x.Load64(c.metaAddr(g, cp).Add(8))
	src := c.copyAddr(g, cp)
	sum := groupCRC(g, seq)
	var out [][]byte
	var off, n uint64
	for _, s := range sizes {
		b := make([]byte, s)
		x.LoadBytes(src.Add(off), b)
		sum = seal.Update(sum, b)
		out = append(out, b)
		off += roundUp(s, Line)
		n += s
	}
	if err := execErr(x); err != nil {
		return nil, 0, err
	}
	if ms != seq || uint32(mw) != sum || mw>>32 != n {
		return nil, 0, fmt.Errorf("%w: group %d copy %d: sequence %d, checksum %08x, %d bytes; want %d, %08x, %d",
			ErrCorrupt, g, cp, ms, uint32(mw), mw>>32, seq, sum, n)
	}
	return out, seq, nil
}

// Restore copies group g's consistent copy back into its registered ranges,
// in registration order, after verifying its checksum; the writes are
// durable when it returns.
func (c *Checkpoint) Restore(x Exec, g int) error {
	if err := c.checkGroup(x, g); err != nil {
		return err
	}
	if err := c.registered(x, g); err != nil {
		return err
	}
	sizes := make([]uint64, len(c.regs[g]))
	for i, s := range c.regs[g] {
		sizes[i] = s.n
	}
	data, _, err := c.load(x, g, sizes)
	if err != nil {
		return err
	}
	for i, s := range c.regs[g] {
		x.StoreBytes(s.a, data[i])
	}
	x.Durable()
	return execErr(x)
}

// Check verifies the registration table of every group and, for every saved
// group, the metadata and checksum of its consistent copy.
func (c *Checkpoint) Check(x Exec) error {
	if err := checkExec(x); err != nil {
		return err
	}
	var errs []error
	for g := 0; g < c.groups && len(errs) < maxReported; g++ {
		sizes, err := c.sizes(x, g)
		if err == nil {
			_, _, err = c.load(x, g, sizes)
			if errors.Is(err, ErrNoCheckpoint) {
				err = nil
			}
		}
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				return err
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
