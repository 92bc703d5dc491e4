package certs

// CABundleOwnerAnnotation, on a CRD or webhook configuration, names the
// install (namespace/secret) whose CA its caBundle holds. Another install
// finding it does not write the caBundle and reports the conflict.
const CABundleOwnerAnnotation = "manager.ndsl.cn/cabundle-owner"
