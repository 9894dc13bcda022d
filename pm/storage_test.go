package pm_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/functional"
)

// fakeStore is a Storage backend keeping regions in a map, as a file-backed
// backend keeps them in a directory: they outlive the machine.
type fakeStore struct {
	*functional.Backend
	regions map[string]pm.StoredRegion
	failOn  string
}

func (f *fakeStore) Stored() ([]pm.StoredRegion, error) {
	var out []pm.StoredRegion
	for _, r := range f.regions {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b pm.StoredRegion) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (f *fakeStore) CreateStored(name string, base pm.Addr, size uint64) ([]byte, error) {
	if name == f.failOn {
		return nil, errors.New("disk full")
	}
	r := pm.StoredRegion{Name: name, Base: base, Data: make([]byte, size)}
	f.regions[name] = r
	return r.Data, nil
}

func (f *fakeStore) RemoveStored(name string) error {
	delete(f.regions, name)
	return nil
}

func TestStorageBackend(t *testing.T) {
	st := &fakeStore{Backend: functional.New(pm.GPULimits{}), regions: map[string]pm.StoredRegion{}, failOn: "bad"}
	m, err := pm.NewMachine(st)
	require.NoError(t, err)
	r, err := m.CreateRegion("kept", 16)
	require.NoError(t, err)
	_, err = m.CreateRegion("gone", 16)
	require.NoError(t, err)
	_, err = m.CreateRegion("bad", 16)
	require.ErrorIs(t, err, pm.ErrBackend)
	require.NoError(t, m.CopyIn(r.Base, []byte("stored bytes")))
	require.Equal(t, "stored bytes", string(st.regions["kept"].Data[:12]), "the backend's bytes are the visible image")
	require.NoError(t, m.RemoveRegion("gone"))
	require.Len(t, st.regions, 1)

	// A new machine on the same store sees the same regions, same bases.
	st2 := &fakeStore{Backend: functional.New(pm.GPULimits{}), regions: st.regions}
	m2, err := pm.NewMachine(st2)
	require.NoError(t, err)
	r2, err := m2.OpenRegion("kept")
	require.NoError(t, err)
	require.Equal(t, r, r2)
	_, err = pm.Reopen(&pm.Image{}, st2)
	require.ErrorIs(t, err, pm.ErrBackend)

	// A store that lists a broken namespace is refused, not mapped.
	st2.regions["dup"] = pm.StoredRegion{Name: "dup", Base: r.Base, Data: make([]byte, 8)}
	_, err = pm.NewMachine(st2)
	require.ErrorIs(t, err, pm.ErrCorrupt)
}
