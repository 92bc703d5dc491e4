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
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestHashTellsDataApart(t *testing.T) {
	cms := []*corev1.ConfigMap{
		{},
		{Data: map[string]string{"a": "1"}},
		{Data: map[string]string{"a": "12"}},
		{Data: map[string]string{"a1": "2"}},
		{Data: map[string]string{"a": "1", "b": "2"}},
		{BinaryData: map[string][]byte{"a": []byte("1")}},
	}
	seen := map[string]int{}
	for i, cm := range cms {
		h := Hash(cm)
		if j, ok := seen[h]; ok {
			t.Errorf("ConfigMaps %d and %d hash alike: %s", j, i, h)
		}
		seen[h] = i
	}
	if Hash(&corev1.ConfigMap{Data: map[string]string{"a": "1", "b": "2"}}) != Hash(&corev1.ConfigMap{Data: map[string]string{"b": "2", "a": "1"}}) {
		t.Error("the hash depends on the maps' order")
	}
}

// client-go may transform an object it already transformed: the hash must
// stay the data's.
func TestTransformIsIdempotent(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "n", Annotations: map[string]string{"x": "y"}},
		Data: map[string]string{"level": "debug"}}
	once, _ := TransformConfigMap(cm)
	twice, _ := TransformConfigMap(once)
	want := Hash(cm)
	for _, got := range []any{once, twice} {
		c := got.(*corev1.ConfigMap)
		if c.Annotations[HashAnnotation] != want || c.Data != nil {
			t.Errorf("transformed: annotations %v, data %v; want only the hash %s", c.Annotations, c.Data, want)
		}
	}
}
