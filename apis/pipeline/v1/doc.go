// Package v1 holds the v1 API of the distri-infer.ndsl.cn group: Pipeline,
// a cluster-scoped chain of model-serving steps sharing one NFS model store.
// Its schema is the same as v1beta1's, the storage version, so the API
// server converts between them by rewriting apiVersion alone.
//
// +k8s:deepcopy-gen=package
// +groupName=distri-infer.ndsl.cn
// +groupGoName=Pipeline
package v1
