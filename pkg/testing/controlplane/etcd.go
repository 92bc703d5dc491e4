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

package controlplane

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"path"
)

// EtcdKey is where the API server keeps an object in etcd, under its
// default --etcd-prefix: /registry/<group>/<resource>/[<namespace>/]<name>.
func EtcdKey(group, resource, namespace, name string) string {
	return path.Join("/registry", group, resource, namespace, name)
}

// EtcdValue reads key's value from etcd as the API server wrote it (a
// custom resource as JSON), through etcd's JSON gateway; found is false
// when there is no such key.
func (cp *ControlPlane) EtcdValue(ctx context.Context, key string) (value []byte, found bool, err error) {
	body, err := json.Marshal(map[string]string{"key": base64.StdEncoding.EncodeToString([]byte(key))})
	if err != nil {
		return nil, false, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cp.EtcdURL+"/v3/kv/range", bytes.NewReader(body))
	if err != nil {
		return nil, false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, false, fmt.Errorf("reading %s from etcd: %w", key, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, false, fmt.Errorf("reading %s from etcd: %s", key, resp.Status)
	}
	var out struct {
		KVs []struct {
			Value []byte `json:"value"` // base64 in JSON
		} `json:"kvs"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, false, fmt.Errorf("decoding etcd's answer for %s: %w", key, err)
	}
	if len(out.KVs) != 1 {
		return nil, false, nil
	}
	return out.KVs[0].Value, true, nil
}

// StoredAPIVersion is the apiVersion of the object at key as etcd holds it,
// the version the API server stored it at (custom resources are stored as
// JSON); empty when there is no such key.
func (cp *ControlPlane) StoredAPIVersion(ctx context.Context, key string) (string, error) {
	value, found, err := cp.EtcdValue(ctx, key)
	if err != nil || !found {
		return "", err
	}
	var stored struct {
		APIVersion string `json:"apiVersion"`
	}
	if err := json.Unmarshal(value, &stored); err != nil {
		return "", fmt.Errorf("%s is not JSON in etcd: %w", key, err)
	}
	return stored.APIVersion, nil
}
