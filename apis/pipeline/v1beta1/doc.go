// Package v1beta1 holds the v1beta1 API of the distri-infer.ndsl.cn group:
// Pipeline, a cluster-scoped chain of model-serving steps sharing one NFS
// model store, exactly as the design notes describe it (csiParameter a
// string map, the storage type beside or inside it). v1beta1 is the storage
// version and the version the controller works with; v1 is a cleaned-up
// API served through the conversion webhook.
//
// +k8s:deepcopy-gen=package
// +groupName=distri-infer.ndsl.cn
// +groupGoName=Pipeline
package v1beta1
