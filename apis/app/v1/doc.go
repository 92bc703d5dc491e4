// Package v1 holds the v1 API of the ingress.example.com group: App, in the
// shape of the Kubernetes API conventions (camelCase fields, an enum rather
// than two coupled booleans). v1beta1, the design notes' API, is the storage
// version; the conversion webhook translates between the two.
//
// +k8s:deepcopy-gen=package
// +groupName=ingress.example.com
// +groupGoName=App
package v1
