// Package v1beta1 holds the v1beta1 API of the distri-infer.ndsl.cn group:
// Pipeline, a cluster-scoped chain of model-serving steps sharing one NFS
// model store. v1beta1 is the storage version; v1 has the same schema.
//
// +k8s:deepcopy-gen=package
// +groupName=distri-infer.ndsl.cn
// +groupGoName=Pipeline
package v1beta1
