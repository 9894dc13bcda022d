package pm

import "fmt"

// Scope names a group of threads that an ordering or synchronising verb
// covers, from the narrowest to the widest. Package scope re-exports it.
type Scope uint8

// The scopes, narrowest first. A wider scope covers every narrower one.
const (
	Thread Scope = iota // the issuing thread alone
	Warp                // the threads of one warp
	Block               // the threads of one thread block (CTA, workgroup)
	Device              // every thread of the GPU (kernel scope)
	System              // the GPU, the CPUs and the host
)

var scopeNames = [...]string{"thread", "warp", "block", "device", "system"}

// String returns the lower-case name of s ("thread", "block", ...).
func (s Scope) String() string {
	if int(s) < len(scopeNames) {
		return scopeNames[s]
	}
	return fmt.Sprintf("scope(%d)", uint8(s))
}

// Valid reports whether s is one of the defined scopes.
func (s Scope) Valid() bool { return s <= System }

// ParseScope returns the scope named name (as printed by String).
func ParseScope(name string) (Scope, error) {
	for i, n := range scopeNames {
		if n == name {
			return Scope(i), nil
		}
	}
	return 0, fmt.Errorf("pm: unknown scope %q", name)
}

// Covers reports whether scope s includes both agents a and b: the same
// thread for Thread, the same warp for Warp, the same block for Block, the
// same GPU for Device (CPU tasks are never in a device scope), and anyone for
// System.
func (s Scope) Covers(a, b *Agent) bool {
	switch s {
	case Thread:
		return a.Kind == b.Kind && a.ID == b.ID
	case Warp:
		return a.Kind == GPUThread && b.Kind == GPUThread && a.Warp == b.Warp
	case Block:
		return a.Kind == GPUThread && b.Kind == GPUThread && a.Block == b.Block
	case Device:
		return a.Kind == GPUThread && b.Kind == GPUThread
	default:
		return true
	}
}
