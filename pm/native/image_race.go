//go:build unix && race

package native

// Under the race detector images live in the Go heap, where it watches
// them (see image.go).

func newImage(size uint64) ([]byte, error) { return make([]byte, size), nil }

func freeImage([]byte) error { return nil }

func newMapping(size uint64) ([]byte, error) { return make([]byte, size), nil }
