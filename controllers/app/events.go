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

package app

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	appv1 "github.com/ndsl/controller-manager/apis/app/v1"
)

// childWrites is what one reconcile wrote of an App's children, recorded
// as at most one Normal event ("Created Deployment, Service and Ingress"),
// not one per child.
type childWrites struct {
	created, updated, deleted []string
}

// record sends the event, if anything was written.
func (w childWrites) record(recorder record.EventRecorder, app *appv1.App) {
	reason, message := w.event()
	if reason != "" {
		recorder.Event(app, corev1.EventTypeNormal, reason, message)
	}
}

// event is the reason and message of the event; reason is empty when
// nothing was written. The reason is the first kind of write of Created,
// Updated and Deleted.
func (w childWrites) event() (reason, message string) {
	var parts []string
	for _, part := range []struct {
		reason, verb string
		kinds        []string
		why          string
	}{
		{"Created", "created", w.created, ""},
		{"Updated", "updated", w.updated, " to match the App"},
		{"Deleted", "deleted", w.deleted, ": the App no longer asks for it"},
	} {
		if len(part.kinds) == 0 {
			continue
		}
		if reason == "" {
			reason = part.reason
		}
		parts = append(parts, part.verb+" "+joinKinds(part.kinds)+part.why)
	}
	if reason == "" {
		return "", ""
	}
	message = strings.Join(parts, "; ")
	return reason, strings.ToUpper(message[:1]) + message[1:]
}

// joinKinds is "Deployment", "Deployment and Service", "Deployment,
// Service and Ingress".
func joinKinds(kinds []string) string {
	if len(kinds) == 1 {
		return kinds[0]
	}
	return strings.Join(kinds[:len(kinds)-1], ", ") + " and " + kinds[len(kinds)-1]
}
