// Package v1 holds the v1 API of the distri-infer.ndsl.cn group: Pipeline in
// a cleaned-up shape (typed NFS storage instead of a string map, one list of
// node names per step, status per child). v1beta1 is the storage version;
// the conversion webhook translates between the two.
//
// +k8s:deepcopy-gen=package
// +groupName=distri-infer.ndsl.cn
// +groupGoName=Pipeline
package v1
