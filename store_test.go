package lifecycle_test

import (
	"reflect"
	"testing"

	"github.com/tasklifecycle/lifecycle"
)

// maxStoreMethods is the most methods a user's Store may have to
// implement, Store and Tx together (Update and Close included). A Store
// is what a host writes to keep the Service's data in its own database:
// it should be a day's work, not a week's. What only some features need
// belongs in an optional interface found by type assertion
// (lifecycle.InstanceLeaser, lifecycle.Notifier, ...), not here.
const maxStoreMethods = 45

func TestStoreStaysSmall(t *testing.T) {
	t.Parallel()
	var names []string
	for _, typ := range []reflect.Type{reflect.TypeFor[lifecycle.Store](), reflect.TypeFor[lifecycle.Tx]()} {
		for i := range typ.NumMethod() {
			names = append(names, typ.Name()+"."+typ.Method(i).Name)
		}
	}
	t.Logf("Store and Tx: %d methods", len(names))
	if n := len(names); n > maxStoreMethods {
		t.Errorf("Store and Tx have %d methods a user's Store must implement, more than %d: a Store should stay short work for a host to write; "+
			"make what only some deployments need an optional interface found by type assertion, or fold a method into another's params.\n%v",
			n, maxStoreMethods, names)
	}
}
