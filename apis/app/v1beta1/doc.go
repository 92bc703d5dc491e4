// Package v1beta1 holds the v1beta1 API of the ingress.example.com group:
// App, a namespaced workload that becomes a Deployment and, on request, a
// Service and an Ingress.
//
// +k8s:deepcopy-gen=package
// +groupName=ingress.example.com
// +groupGoName=App
package v1beta1
