package pm

// Wrapper is implemented by a backend that wraps another one (a recorder,
// a fault injector, a crash probe). Unwrap returns the wrapped backend, so
// that optional interfaces of the backend below (Storage, Residency, a
// timing backend's own API) stay reachable through any stack of wrappers.
type Wrapper interface {
	Backend
	Unwrap() Backend
}

// As returns the first backend in b's chain of wrappers, starting with b
// itself, that implements T, the way errors.As walks an error chain:
//
//	if r, ok := pm.As[pm.Residency](m.Backend()); ok { ... }
//
// A wrapper that needs to see the calls of an optional interface
// implements it itself; otherwise the call goes straight to the backend
// below, which is what a wrapper that only observes verbs wants.
func As[T any](b Backend) (T, bool) {
	for b != nil {
		if t, ok := b.(T); ok {
			return t, true
		}
		w, ok := b.(Wrapper)
		if !ok {
			break
		}
		b = w.Unwrap()
	}
	var zero T
	return zero, false
}
