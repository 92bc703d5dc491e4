// Package podmetrics is a stand-in for metrics-server in tests: an HTTPS
// server in the test process that serves the aggregated API
// metrics.k8s.io/v1beta1 (discovery, and PodMetrics of Running pods), with
// usage that the test decides, so that kube-controller-manager's HPA
// controller scales on resource metrics in a cluster without kubelets.
//
// kube-apiserver reaches it through an APIService whose Service is of type
// ExternalName "localhost": the aggregator proxies to <externalName>:<port>,
// while Endpoints refuse loopback addresses. The API server needs no extra
// flags for that: without --proxy-client-cert-file it proxies without a
// client certificate, and the stand-in authenticates nobody.
package podmetrics
