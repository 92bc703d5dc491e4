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

package controller

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NotOwnedError says an object the controller wanted to manage exists but is
// controlled by someone else (or nobody). Controllers never adopt, modify or
// delete such an object; they report it and retry with backoff.
type NotOwnedError struct {
	Kind      string
	Namespace string
	Name      string
	// Owner describes the actual controller, empty when there is none.
	Owner string
}

func (e *NotOwnedError) Error() string {
	owner := "no controller"
	if e.Owner != "" {
		owner = "controller " + e.Owner
	}
	if e.Namespace == "" {
		return fmt.Sprintf("%s %s exists and is not ours (it has %s)", e.Kind, e.Name, owner)
	}
	return fmt.Sprintf("%s %s/%s exists and is not ours (it has %s)", e.Kind, e.Namespace, e.Name, owner)
}

// NewNotOwnedError describes obj, an object of kind that owner does not control.
func NewNotOwnedError(kind string, obj metav1.Object) *NotOwnedError {
	e := &NotOwnedError{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}
	if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
		e.Owner = fmt.Sprintf("%s %s", ref.Kind, ref.Name)
	}
	return e
}
