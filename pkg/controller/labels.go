package controller

// ManagedByLabel and ManagedByValue mark every object this manager creates,
// so that it (and the Cleanup controller) can tell its objects from others.
const (
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedByValue = "ndsl-controller-manager"
)

// FieldManager is the name this manager writes under (server-side apply
// and managedFields).
const FieldManager = "ndsl-controller-manager"
