package hwmodel

// memSystem is the memory hardware every model's traffic crosses: the
// persistency models decide when a line is written and what a verb waits
// for, and memSystem decides how long the write takes. Every limit on the
// path is a finite resource with a source (keys.go):
//
//   - each SM's injection port into the interconnect
//     (mem.inject_bytes_per_cycle), beside it, when PM is far, the SM's
//     own rate of writes towards PM over PCIe (mem.sm_far_gbps), and its
//     outstanding line writes (mem.sm_writes), held from the write's
//     departure to its ack (with mem.volatile_slots, volatile stores
//     too, until the L2 takes them), and its outstanding line reads
//     (mem.sm_reads: the L1's miss-status entries), held from a load's
//     miss in the L1 until its data is back, with the data they bring
//     back (mem.sm_read_bytes);
//   - the L2: its hit latency (l2.latency_cycles) and, per bank, a data
//     port (mem.l2_port_bytes_per_cycle); a line it takes for an SM's
//     volatile store or load miss waits until the dirty line its way held
//     has entered its channel's write queue (GPGPU-Sim's L2 stalls while
//     its queue towards memory is full), so a stream over a dirty L2 goes
//     at the memory's write bandwidth;
//   - the memory partitions (mem.channels channels of
//     mem.banks_per_channel L2 banks each; lines interleave over the banks):
//     each channel's device memory and NVM have a finite write queue
//     (mem.write_queue_entries) that a write enters when it reaches the
//     partition and leaves when the device has taken its bytes (the
//     channel's share of the write bandwidth) and its write latency has
//     passed, so latency and bandwidth both reach the writer through the
//     queue's occupancy (Little's law);
//   - a write takes a queue entry or an outstanding-write slot only where
//     one is free for its whole hold (occupancy.fit), so no queue ever
//     holds more than its entries, in whatever order the engine books
//     the writes;
//   - PCIe for PM-far, each direction its own bandwidth when full duplex;
//     with pcie.write_buffer_bytes, a buffer in front of it that takes
//     the SMs' writes (posted: the SM's slot frees as it takes them) and
//     holds them until they have crossed; with pcie.tlp_bytes a read's
//     request crosses the writes' direction as a packet of its own,
//     behind the writes posted before it (with the buffer: those it
//     holds when the request arrives);
//   - the persistence point: with persist.ack_at_queue, the GPU's memory
//     partition, which acknowledges a write when its PM queue has room for
//     it, before PM-far's link latency (the SBRP artifact, ADR and eADR
//     alike); otherwise ADR (durable once the NVM has written it) or eADR
//     (durable once it reaches the last-level cache; the bytes still drain
//     through the queues).
//
// Reads that miss in the L2 take the L2 bank's port, the channel's read
// bandwidth and latency, and PCIe when PM is far; with mem.reads_queue
// (GPGPU-Sim's one scheduler queue for both) they also take an entry of
// the channel's queue beside the writes, so a full queue of writes holds
// them back. A model's own limits (SBRP's flush window, its persist
// buffer, the NVW-FIFOs) are its policy's.
type memSystem struct {
	lineShift  uint
	l2Lat      uint64
	pcieLat    uint64
	tlp        uint64 // pcie.tlp_bytes
	eadrLat    uint64
	far, eadr  bool
	ackAtQueue bool
	farPort    bool // mem.sm_far_gbps set and PM far
	readsQueue bool // mem.reads_queue
	volSlots   bool // mem.volatile_slots
	writesMax  int  // mem.sm_writes
	readsMax   int  // mem.sm_reads
	wordsMax   int  // mem.sm_read_bytes in 4-byte words; 0: no limit
	queueMax   int  // mem.write_queue_entries
	bufMax     int  // pcie.write_buffer_bytes in bufferUnit sectors; 0: no buffer
	banks      uint64
	perChannel uint64

	sms   []smPort
	ports []resource // per L2 bank
	nvm   []channel  // per channel
	dram  []channel
	up    resource // PCIe, GPU to host (writes to PM-far)
	down  resource // PCIe, host to GPU (reads); the same as up when half duplex
	half  bool

	// buf holds, with pcie.write_buffer_bytes, the PM-far writes between
	// the L2 and the link, in bufferUnit sectors; posted notes each one's
	// entry into it against its departure onto the link, for the read
	// requests that wait for what the buffer holds.
	buf    occupancy
	posted *watermark

	// drained is when every write issued so far has been taken by its
	// queue (the kernel-end flush waits for it).
	drained uint64

	// acks and gone, with gpu.fence_waits_all, note every write's
	// departure against its completion (a PM write's ack, a volatile
	// write's arrival in the L2) and against the cycle it left the GPU's
	// queues (onto the link for PM-far, into the partition otherwise), for
	// the system and device fences that wait for every earlier write.
	acks, gone *watermark

	// audit (tests only) makes every hold check the most slots its
	// calendar then holds in its interval; over is the most by which such
	// a count exceeded the calendar's limit (0 or less: never).
	audit bool
	over  int
}

// hold takes a slot of o from start to end, and audits it when asked.
func (m *memSystem) hold(o *occupancy, start, end uint64, limit int) {
	o.add(start, end)
	if m.audit {
		m.over = max(m.over, int(o.peak(start, end))-limit)
	}
}

// smPort is an SM's side of the memory system.
type smPort struct {
	inject resource  // bytes into the interconnect
	far    resource  // bytes towards PM over PCIe (mem.sm_far_gbps)
	writes occupancy // outstanding line writes
	reads  occupancy // outstanding line reads (L1 misses)
	words  occupancy // their data, in 4-byte words (mem.sm_read_bytes)
}

// channel is one memory channel of a device: a write queue in front of its
// write bandwidth, and its read bandwidth (shared with writes when the bus
// is shared).
type channel struct {
	queue        occupancy
	rd, wr       resource
	shared       bool
	rdLat, wrLat uint64
}

func newChannels(c MemConfig, n int, clockMHz float64) []channel {
	chs := make([]channel, n)
	for i := range chs {
		chs[i] = channel{
			rd: newResource(c.ReadGBps/float64(n), clockMHz), wr: newResource(c.WriteGBps/float64(n), clockMHz),
			shared: c.SharedBus, rdLat: uint64(c.ReadLatencyCycles), wrLat: uint64(c.WriteLatencyCycles),
		}
	}
	return chs
}

func newMemSystem(cfg Config, lineShift uint) *memSystem {
	clk := cfg.GPU.ClockMHz
	m := &memSystem{
		lineShift: lineShift,
		l2Lat:     uint64(cfg.L2.LatencyCycles), pcieLat: uint64(cfg.PCIe.LatencyCycles), tlp: uint64(cfg.PCIe.TLPBytes),
		eadrLat: uint64(cfg.Persist.EADRLatencyCycles),
		far:     cfg.PCIe.PMFar, eadr: cfg.Persist.Point == pointEADR, ackAtQueue: cfg.Persist.AckAtQueue,
		writesMax: cfg.Mem.SMWrites, readsMax: cfg.Mem.SMReads, wordsMax: cfg.Mem.SMReadBytes / 4, queueMax: cfg.Mem.WriteQueueEntries, readsQueue: cfg.Mem.ReadsQueue,
		volSlots:   cfg.Mem.VolatileSlots,
		perChannel: uint64(cfg.Mem.BanksPerChannel),
		half:       !cfg.PCIe.FullDuplex,
	}
	if m.far {
		m.bufMax = cfg.PCIe.WriteBufferBytes / bufferUnit
	}
	if m.bufMax > 0 {
		m.posted = &watermark{}
	}
	m.banks = uint64(cfg.Mem.Channels * cfg.Mem.BanksPerChannel)
	m.farPort = m.far && cfg.Mem.SMFarGBps > 0
	m.sms = make([]smPort, cfg.GPU.SMs)
	for i := range m.sms {
		m.sms[i].inject = perCycleBytes(cfg.Mem.InjectBytesPerCycle)
		if m.farPort {
			m.sms[i].far = newResource(cfg.Mem.SMFarGBps, clk)
		}
	}
	m.ports = make([]resource, m.banks)
	for i := range m.ports {
		m.ports[i] = perCycleBytes(cfg.Mem.L2PortBytesPerCycle)
	}
	m.nvm = newChannels(cfg.NVM, cfg.Mem.Channels, clk)
	m.dram = newChannels(cfg.DRAM, cfg.Mem.Channels, clk)
	m.up = newResource(cfg.PCIe.GBps, clk)
	m.down = newResource(cfg.PCIe.GBps, clk)
	if cfg.GPU.FenceWaitsAll {
		m.acks, m.gone = &watermark{}, &watermark{}
	}
	return m
}

// wrote notes, for gpu.fence_waits_all, a write seen from cycle start (a
// PM write or a volatile store once it has left its SM: another SM's fence
// cannot see what still waits for the SM's port; a write-back from the L2
// from its issue there) that left the GPU's queues at out and completes,
// for a system fence, at done.
func (m *memSystem) wrote(start, out, done uint64) {
	if m.acks != nil {
		m.acks.note(start, done)
		m.gone.note(start, out)
	}
}

// earlier returns, with gpu.fence_waits_all, the latest completion (sys
// set: of system scope) or departure from the GPU's queues (device scope)
// of the writes any SM issued by cycle t; 0 without the key.
func (m *memSystem) earlier(t uint64, sys bool) uint64 {
	switch {
	case m.acks == nil:
		return 0
	case sys:
		return m.acks.by(t)
	}
	return m.gone.by(t)
}

// perCycleBytes returns a resource that moves n bytes per cycle.
func perCycleBytes(n int) resource {
	return resource{perByte: (1<<fracBits + uint64(n) - 1) / uint64(n)}
}

// bank returns the L2 bank (memory partition) of line, and its channel.
func (m *memSystem) bank(line uint64) (bank, ch uint64) {
	bank = line % m.banks
	return bank, bank / m.perChannel
}

// link returns the PCIe direction writes (up) or reads take.
func (m *memSystem) link(up bool) *resource {
	if up || m.half {
		return &m.up
	}
	return &m.down
}

// each calls f on every resource and occupancy calendar of the system.
func (m *memSystem) each(res func(*resource), occ func(*occupancy)) {
	for i := range m.sms {
		res(&m.sms[i].inject)
		if m.farPort {
			res(&m.sms[i].far)
		}
		occ(&m.sms[i].writes)
		occ(&m.sms[i].reads)
		if m.wordsMax > 0 {
			occ(&m.sms[i].words)
		}
	}
	for i := range m.ports {
		res(&m.ports[i])
	}
	for _, chs := range [2][]channel{m.nvm, m.dram} {
		for i := range chs {
			chs[i].each(res, occ)
		}
	}
	res(&m.up)
	res(&m.down)
	if m.bufMax > 0 {
		occ(&m.buf)
	}
}

func (m *memSystem) reset(at uint64) {
	m.each(func(r *resource) { r.reset(at) }, func(o *occupancy) { o.reset(at) })
	if m.acks != nil {
		m.acks.reset(at)
		m.gone.reset(at)
	}
	if m.posted != nil {
		m.posted.reset(at)
	}
}

func (m *memSystem) trim(at uint64) {
	m.each(func(r *resource) { r.trim(at) }, func(o *occupancy) { o.trim(at) })
	if m.acks != nil {
		m.acks.trim(at)
		m.gone.trim(at)
	}
	if m.posted != nil {
		m.posted.trim(at)
	}
}

// each calls f on the channel's buses and its queue's calendar.
func (c *channel) each(res func(*resource), occ func(*occupancy)) {
	res(&c.rd)
	res(&c.wr)
	occ(&c.queue)
}

// reset starts the channel's calendars over at cycle at.
func (c *channel) reset(at uint64) {
	c.each(func(r *resource) { r.reset(at) }, func(o *occupancy) { o.reset(at) })
}

// trim forgets the channel's reservations before cycle at.
func (c *channel) trim(at uint64) {
	c.each(func(r *resource) { r.trim(at) }, func(o *occupancy) { o.trim(at) })
}

// write puts n bytes into the channel's queue from cycle x and returns when
// the queue took them and when the device has written them.
//
// The queue serves writes in arrival order: a write enters it when an entry
// is free for as long as it will hold it and it is at most queueMax
// transfers from the bus, and holds the entry until the device has written
// it. The bus's calendar books transfers out of time order (warps the
// engine ran ahead book first), so a write that finds the bus booked far
// ahead waits outside the queue rather than holding an entry all that time:
// the queue's entries stay bounded by its own FIFO service, and no write is
// durable before the bus can take it within queueMax transfers.
func (c *channel) write(x, n uint64, queueMax int) (in, done uint64) {
	in = c.admit(x, n, queueMax)
	done = c.writeBus(in, n, true) + c.wrLat
	c.queue.add(in, done)
	return in, done
}

// auditWrite is write for a memory system that audits its queues.
func (m *memSystem) auditWrite(c *channel, x, n uint64) (in, done uint64) {
	in, done = c.write(x, n, m.queueMax)
	if m.audit {
		m.over = max(m.over, int(c.queue.peak(in, done))-m.queueMax)
	}
	return in, done
}

// dryWrite is write without reserving anything: when the queue would take
// the bytes and when the device would have written them.
func (c *channel) dryWrite(x, n uint64, queueMax int) (in, done uint64) {
	in = c.admit(x, n, queueMax)
	return in, c.writeBus(in, n, false) + c.wrLat
}

// admit returns when the queue takes n bytes that reached it at cycle x:
// once an entry is free for as long as they will hold it, and no earlier
// than queueMax transfers before the bus can take them.
func (c *channel) admit(x, n uint64, queueMax int) uint64 {
	svc := (n*c.wr.perByte + (1<<fracBits - 1)) >> fracBits
	hold := func(s uint64) uint64 { return c.writeBus(s, n, false) + c.wrLat }
	in := c.queue.fit(x, queueMax, hold)
	if ahead, end := uint64(queueMax)*svc, c.writeBus(in, n, false); end > in+ahead {
		in = c.queue.fit(end-ahead, queueMax, hold)
	}
	return in
}

// writeBus moves n written bytes over the channel's bus from cycle x at
// the write bandwidth and returns when they are done: on the write bus, or
// on the bus reads and writes share. With book false it is a dry run.
func (c *channel) writeBus(x, n uint64, book bool) uint64 {
	bus := &c.wr
	if c.shared {
		bus = &c.rd
	}
	if !book {
		return bus.endAs(x, n, c.wr.perByte)
	}
	return bus.transferAs(x, n, c.wr.perByte)
}

// readFrom reads n bytes from channel c from cycle x and returns when they
// are back at the partition. With mem.reads_queue the read first takes an
// entry of the channel's queue, free for as long as it holds it (until
// its bytes have crossed the bus), and so waits behind a full queue. With
// book false it is a dry run.
func (m *memSystem) readFrom(c *channel, x, n uint64, book bool) uint64 {
	if !m.readsQueue {
		return c.rd.take(x, n, book) + c.rdLat
	}
	in := c.queue.fit(x, m.queueMax, func(s uint64) uint64 { return c.rd.endAs(s, n, c.rd.perByte) })
	if !book {
		return c.rd.endAs(in, n, c.rd.perByte) + c.rdLat
	}
	end := c.rd.transfer(in, n)
	m.hold(&c.queue, in, end, m.queueMax)
	return end + c.rdLat
}

// pmWrite is one line write towards the persistence point, as timed.
type pmWrite struct {
	start  uint64 // its outstanding-write slot was taken
	left   uint64 // its bytes have left the SM's injection port
	posted uint64 // the GPU's buffer in front of the link took it (pcie.write_buffer_bytes)
	out    uint64 // it left the GPU's queues: onto the link (PM-far) or into the partition
	queued uint64 // its PM queue took it
	ack    uint64 // it is durable
}

// writePM sends n bytes of PM line from SM sm, no earlier than cycle t,
// to the persistence point, and returns its times. st counts its bytes.
// The write leaves once one of the SM's outstanding-write slots is free
// from its departure to its ack, or, with a buffer in front of the link,
// until the buffer takes it.
func (m *memSystem) writePM(sm int, line, n, t uint64, st *Stats) pmWrite {
	p := &m.sms[sm]
	start := p.writes.fit(t, m.writesMax, func(s uint64) uint64 { return m.pmPath(sm, line, n, s, nil).slotEnd(m) })
	w := m.pmPath(sm, line, n, start, st)
	m.hold(&p.writes, w.start, w.slotEnd(m), m.writesMax)
	// Other SMs' fences see it once it has left its SM (a slot, the
	// injection port, the SM's far rate); its own SM's by its ack.
	m.wrote(w.left, w.out, w.ack)
	return w
}

// slotEnd returns when w frees its SM's outstanding-write slot: when the
// buffer in front of the link takes it, where there is one and PM is
// far, and at its ack otherwise.
func (w pmWrite) slotEnd(m *memSystem) uint64 {
	if m.bufMax > 0 {
		return w.posted
	}
	return w.ack
}

// pmPath times a PM line write of n bytes that leaves SM sm at cycle
// start: with st, it reserves the injection port, the L2 bank's port, the
// link's buffer and the link, and the PM queue and bus, and counts the
// bytes in st; with st nil it is a dry run that reserves nothing.
func (m *memSystem) pmPath(sm int, line, n, start uint64, st *Stats) pmWrite {
	w := pmWrite{start: start}
	w.left = m.sendPM(sm, n, start, st != nil)
	var x, ch uint64
	w.posted, w.out, x, ch = m.toPartition(line, n, w.left+m.l2Lat, st)
	w.queued, w.ack = m.toPM(ch, n, x, st != nil)
	return w
}

// writeFromL2 writes n bytes of PM line back from its L2 bank, no earlier
// than cycle t, to the persistence point (a write-back that starts at the
// L2, as ScopedBarrier's L2 NVW-FIFO issues them: no SM port, no L2
// latency from an SM), and returns its times. st counts its bytes.
func (m *memSystem) writeFromL2(line, n, t uint64, st *Stats) pmWrite {
	posted, out, x, ch := m.toPartition(line, n, t, st)
	w := pmWrite{start: t, left: t, posted: posted, out: out}
	w.queued, w.ack = m.toPM(ch, n, x, true)
	m.wrote(t, w.out, w.ack)
	return w
}

// toPM puts n bytes that reached channel ch's partition at cycle x into its
// PM write queue and returns when the queue took them and when they are
// durable (the persistence point's ack). With book false it is a dry run.
func (m *memSystem) toPM(ch, n, x uint64, book bool) (queued, ack uint64) {
	var in, done uint64
	if book {
		in, done = m.auditWrite(&m.nvm[ch], x, n)
	} else {
		in, done = m.nvm[ch].dryWrite(x, n, m.queueMax)
	}
	switch {
	case m.ackAtQueue:
		// The GPU's memory partition acknowledges the write when the PM
		// queue takes it; the far link's latency lies after the ack.
		ack = in - m.farLat()
	case m.eadr:
		ack = x + m.eadrLat
	default:
		ack = done
	}
	if book {
		m.drained = max(m.drained, ack, in)
	}
	return in, ack
}

// farLat is the latency PM writes pay to reach PM beyond the GPU's memory
// partition: the PCIe link's when PM is far.
func (m *memSystem) farLat() uint64 {
	if m.far {
		return m.pcieLat
	}
	return 0
}

// moreBytes sends n more bytes of a PM line write that left at start (a
// persist-buffer entry a later store merged into): they take the write's
// ports and bandwidth in the same burst; its ack stays.
func (m *memSystem) moreBytes(sm int, line, n, start uint64, st *Stats) {
	left := m.sendPM(sm, n, start, true)
	_, _, x, ch := m.toPartition(line, n, left+m.l2Lat, st)
	m.drained = max(m.drained, m.nvm[ch].writeBus(x, n, true))
}

// sendPM sends n bytes of a PM write out of SM sm from cycle start and
// returns when they have left it: through its injection port and, when PM
// is far and mem.sm_far_gbps is set, at no more than the SM's rate towards
// PM. With book false it is a dry run.
func (m *memSystem) sendPM(sm int, n, start uint64, book bool) uint64 {
	p := &m.sms[sm]
	left := p.inject.take(start, n, book)
	if m.farPort {
		left = max(left, p.far.take(start, n, book))
	}
	return left
}

// toPartition sends n bytes of PM line that reached the L2 at cycle x over
// its bank's port, and PCIe when PM is far, and returns when the buffer in
// front of the link took them (pcie.write_buffer_bytes; without it, when
// they left the port), when they left the GPU's queues (onto the link
// when PM is far), when they reach the memory partition, and its channel.
// st counts the bytes; with st nil it is a dry run that reserves nothing.
func (m *memSystem) toPartition(line, n, x uint64, st *Stats) (posted, out, at, channel uint64) {
	book := st != nil
	bank, ch := m.bank(line)
	x = m.ports[bank].take(x, n, book)
	posted, out = x, x
	if m.far {
		l := m.link(true)
		k := int((n + bufferUnit - 1) / bufferUnit)
		if m.bufMax > 0 {
			// The buffer takes the write once it has room for it until
			// it has crossed the link.
			posted = m.buf.fit(x, m.bufMax-k+1, func(s uint64) uint64 { return l.endAs(s, n+m.tlp, l.perByte) })
		}
		out = l.take(posted, n+m.tlp, book)
		if book && m.bufMax > 0 {
			m.buf.addN(posted, out, uint16(k))
			if m.audit {
				m.over = max(m.over, int(m.buf.peak(posted, out))-m.bufMax)
			}
			m.posted.note(posted, out)
		}
		x = out + m.pcieLat
	}
	if book {
		if m.far {
			st.PCIeBytes += n
		}
		st.NVMWriteBytes += n
	}
	return posted, out, x, ch
}

// bufferUnit is the unit in which the buffer in front of the link counts
// its writes' bytes (pcie.write_buffer_bytes): a 32-byte sector.
const bufferUnit = 32

// victim is the dirty volatile line an L2 fill evicts: its line and the
// bytes to write back (0: the way was clean or free).
type victim struct{ line, n uint64 }

// toL2 sends n bytes of a volatile store from SM sm at cycle t into the L2,
// whose way for it holds dirty victim v, and returns when they have left
// the SM (the store's warp goes on then) and when they are in the L2 (the
// kernel's end waits for it). With mem.volatile_slots the store first
// takes one of the SM's outstanding-write slots, held until the L2 has it.
func (m *memSystem) toL2(sm int, line, n, t uint64, v victim) (left, in uint64) {
	start := t
	p := &m.sms[sm]
	if m.volSlots {
		start = p.writes.fit(t, m.writesMax, func(s uint64) uint64 {
			_, in := m.l2Path(sm, line, n, s, v, false)
			return in
		})
	}
	left, in = m.l2Path(sm, line, n, start, v, true)
	if m.volSlots {
		m.hold(&p.writes, start, in, m.writesMax)
	}
	m.drained = max(m.drained, in)
	// A device fence behind it sees it in the L2. A system fence's marker
	// behind it still crosses from the L2 to the host (pcie.latency_cycles)
	// before the host acknowledges, as it does behind a host write once
	// that has arrived there.
	m.wrote(left, in, in+m.pcieLat)
	return left, in
}

// l2Path times a volatile store of n bytes that leaves SM sm at cycle
// start: over the injection port to its L2 bank, which takes it once the
// victim's write-back has entered its channel's queue (GPGPU-Sim's L2
// stalls while its queue towards memory is full) and then over the
// bank's port. With book false it is a dry run.
func (m *memSystem) l2Path(sm int, line, n, start uint64, v victim, book bool) (left, in uint64) {
	left = m.sms[sm].inject.take(start, n, book)
	at := left + m.l2Lat
	if v.n > 0 {
		at = m.evict(v, at, book)
	}
	bank, _ := m.bank(line)
	return left, m.ports[bank].take(at, n, book)
}

// evict writes dirty victim v back from the L2 to device memory at cycle
// t and returns when its channel's queue took it, when the way is free.
// With book false it is a dry run.
func (m *memSystem) evict(v victim, t uint64, book bool) uint64 {
	_, ch := m.bank(v.line)
	if !book {
		return m.dram[ch].admit(t, v.n, m.queueMax)
	}
	return m.writeBackDRAM(v.line, v.n, t)
}

// writeBackDRAM writes n bytes of a dirty volatile line back from the L2
// to device memory at cycle t and returns when the channel's queue took
// them.
func (m *memSystem) writeBackDRAM(line, n, t uint64) uint64 {
	_, ch := m.bank(line)
	in, _ := m.auditWrite(&m.dram[ch], t, n)
	m.drained = max(m.drained, in)
	return in
}

// readLine reads a line missing in the L2 from memory at cycle x (its
// arrival at the L2) and returns when the data is back at the L2. st
// counts the bytes; with st nil it is a dry run that reserves nothing.
func (m *memSystem) readLine(line, n, x uint64, isPM bool, st *Stats) uint64 {
	book := st != nil
	bank, ch := m.bank(line)
	x = m.ports[bank].take(x, n, book)
	if !isPM {
		if book {
			st.DRAMReadBytes += n
		}
		return m.readFrom(&m.dram[ch], x, n, book)
	}
	if m.far {
		switch {
		case m.tlp > 0 && m.bufMax > 0:
			// The request waits for the writes the buffer in front of the
			// link holds when it arrives (those still waiting to enter it
			// come after it), and takes the link's next turn after them:
			// its bytes are not booked, as they would then land behind
			// every write already booked, held or not.
			x = max(x, m.posted.by(x)) + (m.tlp*m.up.perByte+(1<<fracBits-1))>>fracBits
		case m.tlp > 0:
			// The read's request is a TLP of its own (pcie.tlp_bytes, no
			// data) on the direction the writes take, and PCIe's ordering
			// rules let no read request pass a posted write before it.
			x = m.up.take(x, m.tlp, book)
		}
		x += m.pcieLat // pcie.latency_cycles is the artifact's whole far round trip over device memory
	}
	x = m.readFrom(&m.nvm[ch], x, n, book)
	if book {
		st.NVMReadBytes += n
	}
	if m.far {
		if book {
			st.PCIeBytes += n
		}
		x = m.link(false).take(x, n+m.tlp, book)
	}
	return x
}

// missRead times a line read that missed in SM sm's L1 at cycle t,
// bringing words 4-byte words to its instruction's lanes: it takes one of
// the SM's miss-status entries (mem.sm_reads) and, with mem.sm_read_bytes,
// room for its words, both from the read's start until its data is back,
// and returns when that is. path times the read from a start (with book
// false, a dry run).
func (m *memSystem) missRead(sm int, t, words uint64, path func(start uint64, book bool) uint64) uint64 {
	p := &m.sms[sm]
	dry := func(s uint64) uint64 { return path(s, false) }
	start := p.reads.fit(t, m.readsMax, dry)
	k := uint16(min(words, uint64(m.wordsMax)))
	for m.wordsMax > 0 && k > 0 {
		// The first start from which both have room: each fit only moves
		// it later, and both calendars are free after their last booking.
		s := p.words.fit(start, m.wordsMax-int(k)+1, dry)
		if s == start {
			break
		}
		start = p.reads.fit(s, m.readsMax, dry)
	}
	done := path(start, true)
	m.hold(&p.reads, start, done, m.readsMax)
	if m.wordsMax > 0 && k > 0 {
		p.words.addN(start, done, k)
		if m.audit {
			m.over = max(m.over, int(p.words.peak(start, done))-m.wordsMax)
		}
	}
	return done
}
