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

// Package v1 holds the v1 API of the ingress.example.com group: App, in the
// shape of the Kubernetes API conventions (camelCase fields, an enum rather
// than two coupled booleans). v1 is the storage version; v1beta1, the
// design notes' API, is served through the conversion webhook, which
// translates between the two.
//
// +k8s:deepcopy-gen=package
// +groupName=ingress.example.com
// +groupGoName=App
package v1
