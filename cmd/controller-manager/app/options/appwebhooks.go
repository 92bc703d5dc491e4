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

package options

import (
	"github.com/spf13/pflag"

	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
	appcontroller "github.com/ndsl/controller-manager/controllers/app"
)

func bindAppAdmissionFlags(o *appcontroller.AdmissionOptions, fs *pflag.FlagSet) {
	fs.BoolVar(&o.InvertEnableIngress, "app-invert-enable-ingress", o.InvertEnableIngress,
		"The App defaulting webhook sets enable_ingress to the inverse of the value an App is created with through v1beta1, as the design notes specify, "+
			"once, recording the requested value in the annotation "+appv1beta1.EnableIngressRequestedAnnotation+". false leaves enable_ingress as written.")
}
