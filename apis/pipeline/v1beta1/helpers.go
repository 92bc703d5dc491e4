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

// EffectiveType is the storage type, wherever the manifest put it: beside
// csiParameter or, as the design notes do, inside it.
func (s *ModelStorage) EffectiveType() StorageType {
	if s.Type != "" {
		return s.Type
	}
	return StorageType(s.CSIParameter[CSIParameterType])
}

// NFSServer is the NFS server's host name or IP address.
func (s *ModelStorage) NFSServer() string { return s.CSIParameter[CSIParameterServer] }

// NFSShare is the exported path on the NFS server.
func (s *ModelStorage) NFSShare() string { return s.CSIParameter[CSIParameterShare] }
