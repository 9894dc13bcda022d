package pm

// WordSize is the unit of atomic persistence: an aligned 8-byte word either
// persists whole or not at all; larger stores may tear at word boundaries.
const WordSize = 8

// Persist is one persist record: the part of a PM store that falls in one
// aligned 8-byte word. A crash image keeps or drops each record whole.
type Persist struct {
	Agent Agent
	Seq   uint64  // program-order index of the issuing verb among its agent's verbs
	Addr  Addr    // first byte; Addr and Addr+Size-1 lie in one aligned word
	Size  uint8   // 1..8
	Bytes [8]byte // the value, Bytes[:Size]
}

// Data returns the record's bytes.
func (p *Persist) Data() []byte { return p.Bytes[:p.Size] }

// Persists reports whether op creates persist records: a store, an atomic
// that wrote, or a release, to PM.
func (op *Op) Persists() bool {
	if !op.PM {
		return false
	}
	switch op.Kind {
	case OpStore, OpPRel:
		return true
	case OpAtomic:
		return op.Wrote
	}
	return false
}

// Split calls f with the persist record of each aligned 8-byte word that op
// writes, in address order, if op persists (see Persists). The record's
// Agent and Seq are left for the caller to fill. The Persist passed to f is
// reused between calls.
func (op *Op) Split(f func(p *Persist)) {
	if !op.Persists() {
		return
	}
	var p Persist
	if op.Data == nil {
		// A naturally aligned value of at most 8 bytes: one word.
		p.Addr, p.Size = op.Addr, uint8(op.Size)
		PutLE(p.Bytes[:op.Size], op.Value)
		f(&p)
		return
	}
	data, a := op.Data, op.Addr
	for len(data) > 0 {
		n := min(WordSize-int(a%WordSize), len(data))
		p.Addr, p.Size = a, uint8(n)
		copy(p.Bytes[:], data[:n])
		f(&p)
		data, a = data[n:], a+Addr(n)
	}
}

// Apply writes the record into the image.
func (img *Image) Apply(p *Persist) error { return img.Write(p.Addr, p.Data()) }
