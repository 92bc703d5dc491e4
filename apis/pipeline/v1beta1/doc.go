/*
Copyright The NDSL controller-manager Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Package v1beta1 holds the v1beta1 API of the distri-infer.ndsl.cn group:
// Pipeline, a cluster-scoped chain of model-serving steps sharing one NFS
// model store, exactly as the design notes describe it (csiParameter a
// string map, the storage type beside or inside it). v1 is the storage
// version and the version the controller works with; v1beta1 is served only
// through the conversion webhook.
//
// +k8s:deepcopy-gen=package
// +groupName=distri-infer.ndsl.cn
// +groupGoName=Pipeline
package v1beta1
