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

package v1

// NFSServer is the NFS server's host name or IP address, empty without nfs.
func (s *ModelStorage) NFSServer() string {
	if s.NFS == nil {
		return ""
	}
	return s.NFS.Server
}

// NFSPath is the exported path on the NFS server, empty without nfs.
func (s *ModelStorage) NFSPath() string {
	if s.NFS == nil {
		return ""
	}
	return s.NFS.Path
}
