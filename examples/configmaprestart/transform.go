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

package configmaprestart

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TransformConfigMap cuts a ConfigMap down to its name, namespace,
// resourceVersion and the hash of its data (HashAnnotation), all the
// controller reads: every ConfigMap of the cluster is cached, so only
// their hashes are. Like every transform it may be given its own output
// again (client-go does so), which it returns as it is.
func TransformConfigMap(obj any) (any, error) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return obj, nil // a tombstone: its object was transformed when cached
	}
	if _, done := cm.Annotations[HashAnnotation]; done && len(cm.Annotations) == 1 && cm.Data == nil && cm.BinaryData == nil {
		return cm, nil
	}
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: cm.Name, Namespace: cm.Namespace, UID: cm.UID, ResourceVersion: cm.ResourceVersion,
		Annotations: map[string]string{HashAnnotation: Hash(cm)},
	}}, nil
}

// Hash is a hash of a ConfigMap's data and binary data.
func Hash(cm *corev1.ConfigMap) string {
	// encoding/json writes map keys sorted: equal data, equal bytes.
	data, _ := json.Marshal([]any{cm.Data, cm.BinaryData}) // maps of strings and bytes: no error
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])[:16]
}
