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
