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

package v1beta1

// EnableIngressRequestedAnnotation records, on an App whose enable_ingress
// the defaulting webhook inverted at creation (as the design notes ask),
// the value the App was created with. Its presence means the decision is
// made: the webhook never inverts an App carrying it, so updates and
// reinvocations leave enable_ingress alone.
const EnableIngressRequestedAnnotation = "ingress.example.com/enable-ingress-requested"
