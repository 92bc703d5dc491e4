package v1beta1

// EnableIngressRequestedAnnotation records, on an App whose enable_ingress
// the defaulting webhook inverted at creation (as the design notes ask),
// the value the App was created with. Its presence means the decision is
// made: the webhook never inverts an App carrying it, so updates and
// reinvocations leave enable_ingress alone.
const EnableIngressRequestedAnnotation = "ingress.example.com/enable-ingress-requested"
