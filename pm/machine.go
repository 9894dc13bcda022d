package pm

import (
	"bytes"
	"context"
	"fmt"
)

// Machine is a simulated machine: an address space whose PM regions survive a
// crash, and the backend that decides timing and durability. The host API
// (regions, allocation, copies, crash) lives here; kernels are launched with
// package scope and CPU tasks run with package coro.
//
// A Machine is not safe for concurrent use.
type Machine struct {
	mem     *Memory
	be      Backend
	caps    Caps
	crashed bool
	launch  LaunchDefaults // applied to every kernel launch (SetLaunchDefaults)
}

// ScopeChange makes the verbs it applies to that name scope From use scope
// To instead.
type ScopeChange struct{ From, To Scope }

// LaunchDefaults are settings that the kernel executor (package scope)
// applies to every launch on a machine before the launch's own options.
// Harnesses set them to run a workload, which launches its own kernels, with
// its scopes changed. They belong to the machine and go with it.
type LaunchDefaults struct {
	// Promote changes the scope of persist releases and acquires (PRel,
	// PAcq), in order, before the launch's own promotions
	// (scope.WithPromotion).
	Promote []ScopeChange
	// SiteScopes overrides the scope of the verbs issued from the given
	// call sites (scope.WithSiteScopes; a launch's own option replaces it).
	SiteScopes map[string]Scope
	// Context, if set, cancels every launch once it is done
	// (scope.WithContext; a launch's own option replaces it): a harness
	// bounds the time of a workload that launches its own kernels.
	Context context.Context
}

// SetLaunchDefaults makes every later kernel launch on m apply d before its
// own options; the zero LaunchDefaults removes them.
func (m *Machine) SetLaunchDefaults(d LaunchDefaults) { m.launch = d }

// LaunchDefaults returns the settings of SetLaunchDefaults.
func (m *Machine) LaunchDefaults() LaunchDefaults { return m.launch }

// NewMachine returns a machine on backend be. Its PM regions are those the
// backend stores, if it implements Storage; otherwise it starts empty.
func NewMachine(be Backend) (*Machine, error) {
	if be == nil {
		return nil, fmt.Errorf("%w: nil backend", ErrBackend)
	}
	mem := newMemory()
	if st, ok := As[Storage](be); ok {
		regions, err := st.Stored()
		if err != nil {
			return nil, fmt.Errorf("%w: %s: list regions: %w", ErrBackend, be.Name(), err)
		}
		img := &Image{}
		for _, r := range regions {
			img.Regions = append(img.Regions, RegionImage{Name: r.Name, Base: r.Base, Data: r.Data})
		}
		if err := img.validate(); err != nil {
			return nil, fmt.Errorf("%w: %s stores %w", ErrCorrupt, be.Name(), err)
		}
		for _, r := range regions {
			if _, err := mem.add(PMem, r.Name, uint64(len(r.Data)), int(r.Base>>OffsetBits), r.Data); err != nil {
				return nil, err
			}
		}
	}
	return attach(mem, be)
}

// Reopen returns a machine whose PM regions are those of img, at the same
// base addresses and with the same bytes, on backend be. Volatile memory
// starts empty: a crash lost it. A Storage backend reopens its own regions
// with NewMachine instead.
func Reopen(img *Image, be Backend) (*Machine, error) {
	switch {
	case img == nil:
		return nil, fmt.Errorf("%w: nil image", ErrCorrupt)
	case be == nil:
		return nil, fmt.Errorf("%w: nil backend", ErrBackend)
	}
	if _, ok := As[Storage](be); ok {
		return nil, fmt.Errorf("%w: %s stores its own regions; use NewMachine", ErrBackend, be.Name())
	}
	if err := img.validate(); err != nil {
		return nil, err
	}
	mem := newMemory()
	for _, r := range img.Regions {
		if _, err := mem.add(PMem, r.Name, uint64(len(r.Data)), int(r.Base>>OffsetBits), bytes.Clone(r.Data)); err != nil {
			return nil, err
		}
	}
	return attach(mem, be)
}

func attach(mem *Memory, be Backend) (*Machine, error) {
	caps, err := be.Attach(mem)
	if err != nil {
		return nil, fmt.Errorf("%w: attach %s: %w", ErrBackend, be.Name(), err)
	}
	if caps.GPU == (GPULimits{}) {
		caps.GPU = DefaultGPU()
	}
	return &Machine{mem: mem, be: be, caps: caps}, nil
}

// Memory returns the machine's address space and visible image.
func (m *Machine) Memory() *Memory { return m.mem }

// Backend returns the machine's backend.
func (m *Machine) Backend() Backend { return m.be }

// Caps returns what the backend asked of the executors at Attach.
func (m *Machine) Caps() Caps { return m.caps }

// Err returns ErrCrashed after Crash and nil before.
func (m *Machine) Err() error {
	if m.crashed {
		return ErrCrashed
	}
	return nil
}

// CreateRegion creates a zero-filled PM region of size bytes. The namespace
// change is durable when it returns.
func (m *Machine) CreateRegion(name string, size uint64) (Range, error) {
	if m.crashed {
		return Range{}, ErrCrashed
	}
	if err := checkName(name); err != nil {
		return Range{}, err
	}
	if m.mem.region(name) != nil {
		return Range{}, fmt.Errorf("%w: %q", ErrRegionExists, name)
	}
	if size == 0 || size > MaxRangeSize {
		return Range{}, fmt.Errorf("region %q: %w: %d bytes (want 1..%d)", name, ErrBadSize, size, uint64(MaxRangeSize))
	}
	var data []byte
	idx := 0
	if st, ok := As[Storage](m.be); ok {
		idx = m.mem.freeIndex()
		d, err := st.CreateStored(name, Addr(uint64(idx)<<OffsetBits), size)
		if err != nil {
			return Range{}, fmt.Errorf("%w: %s: create region %q: %w", ErrBackend, m.be.Name(), name, err)
		}
		if uint64(len(d)) != size {
			return Range{}, fmt.Errorf("%w: %s: region %q has %d bytes, want %d", ErrBackend, m.be.Name(), name, len(d), size)
		}
		data = d
	}
	s, err := m.mem.add(PMem, name, size, idx, data)
	if err != nil {
		return Range{}, fmt.Errorf("region %q: %w", name, err)
	}
	m.be.Host(HostEvent{Kind: HostCreate, Range: s.Range})
	if err := m.hostErr(); err != nil {
		return Range{}, fmt.Errorf("%w: %s: create region %q: %w", ErrBackend, m.be.Name(), name, err)
	}
	return s.Range, nil
}

// OpenRegion returns the PM region named name.
func (m *Machine) OpenRegion(name string) (Range, error) {
	if m.crashed {
		return Range{}, ErrCrashed
	}
	s := m.mem.region(name)
	if s == nil {
		return Range{}, fmt.Errorf("%w: %q", ErrNoRegion, name)
	}
	return s.Range, nil
}

// RemoveRegion removes the PM region named name; its addresses become
// unmapped. The namespace change is durable when it returns.
func (m *Machine) RemoveRegion(name string) error {
	if m.crashed {
		return ErrCrashed
	}
	s := m.mem.region(name)
	if s == nil {
		return fmt.Errorf("%w: %q", ErrNoRegion, name)
	}
	if st, ok := As[Storage](m.be); ok {
		if err := st.RemoveStored(name); err != nil {
			return fmt.Errorf("%w: %s: remove region %q: %w", ErrBackend, m.be.Name(), name, err)
		}
	}
	m.mem.remove(s)
	m.be.Host(HostEvent{Kind: HostRemove, Range: s.Range})
	if err := m.hostErr(); err != nil {
		return fmt.Errorf("%w: %s: remove region %q: %w", ErrBackend, m.be.Name(), name, err)
	}
	return nil
}

// Regions lists the PM regions in name order.
func (m *Machine) Regions() []Range { return m.mem.Regions() }

// Alloc allocates a zero-filled volatile range of size bytes of kind
// DeviceMem or HostMem and returns its base address.
func (m *Machine) Alloc(kind Kind, size uint64) (Addr, error) {
	if m.crashed {
		return 0, ErrCrashed
	}
	if kind != DeviceMem && kind != HostMem {
		return 0, fmt.Errorf("%w: Alloc of %s memory (use CreateRegion for PM)", ErrNotVolatile, kind)
	}
	s, err := m.mem.add(kind, "", size, 0, nil)
	if err != nil {
		return 0, err
	}
	m.be.Host(HostEvent{Kind: HostAlloc, Range: s.Range})
	return s.Base, nil
}

// Free releases the volatile range whose base is a.
func (m *Machine) Free(a Addr) error {
	if m.crashed {
		return ErrCrashed
	}
	s, off, err := m.mem.locate(a, 0, 1)
	if err != nil {
		return err
	}
	if off != 0 || s.Kind == PMem {
		return fmt.Errorf("%w: %v", ErrNotVolatile, a)
	}
	m.mem.remove(s)
	m.be.Host(HostEvent{Kind: HostFree, Range: s.Range})
	return nil
}

// CopyIn copies data to address a, in one range. Bytes copied into PM are
// durable when it returns, as after a host memcpy followed by a flush; if
// the backend cannot make them durable (an I/O error of the native
// backend) CopyIn returns its error, wrapping ErrBackend, and the bytes are
// in the visible image but their durability is unknown.
func (m *Machine) CopyIn(a Addr, data []byte) error {
	if m.crashed {
		return ErrCrashed
	}
	s, off, err := m.mem.locate(a, uint64(len(data)), 1)
	if err != nil {
		return err
	}
	copy(s.data[off:], data)
	m.be.Host(HostEvent{Kind: HostWrite, Range: s.Range, Addr: a, Size: uint64(len(data))})
	if s.Kind == PMem {
		if err := m.hostErr(); err != nil {
			return fmt.Errorf("%w: %s: copy in %d bytes at %v: %w", ErrBackend, m.be.Name(), len(data), a, err)
		}
	}
	return nil
}

// Write is one host write of Machine.CopyInMany: Data copied in at Addr.
type Write struct {
	Addr Addr
	Data []byte
}

// CopyInMany is CopyIn of each write of ws in order, in one call: the same
// bytes, durable in the same order and under the same promise. It first
// checks every write's address (each in one range); if one is bad it
// returns that error, naming the write, and writes nothing. A backend
// that implements HostWriter hears of the writes in one HostWrites call,
// otherwise each is reported as CopyIn reports it. If the backend fails
// write i, CopyInMany returns its error (wrapping ErrBackend and naming
// the write): writes before i are durable, and write i and the writes
// after it are in the visible image with their durability unknown, as
// for a CopyIn that fails.
func (m *Machine) CopyInMany(ws []Write) error {
	if m.crashed {
		return ErrCrashed
	}
	for i, w := range ws {
		if _, _, err := m.mem.locate(w.Addr, uint64(len(w.Data)), 1); err != nil {
			return fmt.Errorf("copy in write %d of %d: %w", i, len(ws), err)
		}
	}
	hw, ok := m.be.(HostWriter)
	if !ok {
		for i, w := range ws {
			if err := m.CopyIn(w.Addr, w.Data); err != nil {
				return fmt.Errorf("copy in write %d of %d: %w", i, len(ws), err)
			}
		}
		return nil
	}
	for _, w := range ws {
		s, off, _ := m.mem.locate(w.Addr, uint64(len(w.Data)), 1)
		copy(s.data[off:], w.Data)
	}
	n, err := hw.HostWrites(ws)
	if err != nil {
		w := ws[min(n, len(ws)-1)]
		return fmt.Errorf("%w: %s: copy in write %d of %d (%d bytes at %v): %w", ErrBackend, m.be.Name(), n, len(ws), len(w.Data), w.Addr, err)
	}
	return nil
}

// hostErr returns the backend's error for the last host change, if it can
// fail one (HostErrer).
func (m *Machine) hostErr() error {
	if h, ok := As[HostErrer](m.be); ok {
		return h.HostErr()
	}
	return nil
}

// CopyOut copies len(buf) bytes at address a, in one range, into buf.
func (m *Machine) CopyOut(a Addr, buf []byte) error {
	if m.crashed {
		return ErrCrashed
	}
	return m.mem.Read(a, buf)
}

// Crash crashes the machine and returns its durable image. Volatile memory
// and every persist the backend had not made durable are lost; the machine
// refuses further use. Reopen the image to continue.
func (m *Machine) Crash() (*Image, error) {
	if m.crashed {
		return nil, ErrCrashed
	}
	img, err := m.be.Crash()
	if err != nil {
		return nil, fmt.Errorf("%w: crash %s: %w", ErrBackend, m.be.Name(), err)
	}
	m.crashed = true
	return img, nil
}

// Snapshot returns the visible contents of every PM region as an Image. A
// backend that makes every persist durable at once (the functional one)
// returns it from Crash.
func (m *Memory) Snapshot() *Image {
	var img Image
	for _, r := range m.Regions() {
		s := m.segs[r.Base>>OffsetBits]
		img.Regions = append(img.Regions, RegionImage{Name: r.Name, Base: r.Base, Data: bytes.Clone(s.data)})
	}
	return &img
}
