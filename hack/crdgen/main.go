/*
Copyright The cabpk-formats Authors.

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

// Command crdgen generates this provider's CRDs with controller-gen's CRD
// generator (sigs.k8s.io/controller-tools/pkg/crd), one fresh parser per kind.
//
// Why not the controller-gen binary: our types reuse upstream Cluster API's
// nested types, and upstream's package declares the same group and kinds.
// controller-gen's single shared parser adds every loaded package of a group
// as a CRD version source, so once the first CRD's schema pulled upstream's
// package in, the next CRD got upstream's KubeadmConfigTemplate as a second,
// conflicting v1beta2 entry (plus its printer columns). A parser per kind only
// ever sees this repository's package when it collects versions.
//
//	go -C hack build -o "$PWD/bin/crdgen" ./crdgen && bin/crdgen -output-dir bootstrap/kubeadm/config/crd/bases ./bootstrap/kubeadm/api/...
//
// It runs in the product module's directory: it loads the packages from there.
package main

import (
	"flag"
	"fmt"
	"os"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-tools/pkg/crd"
	"sigs.k8s.io/controller-tools/pkg/genall"
)

// generatorVersion is recorded in each CRD like controller-gen does; keep it
// equal to the controller-tools version in go.mod.
const generatorVersion = "v0.21.0"

type perKindGenerator struct {
	crd.Generator // markers and type-check filters stay controller-gen's own
}

func (g perKindGenerator) newParser(ctx *genall.GenerationContext) *crd.Parser {
	p := &crd.Parser{Collector: ctx.Collector, Checker: ctx.Checker}
	crd.AddKnownTypes(p)
	for _, root := range ctx.Roots {
		p.NeedPackage(root)
	}
	return p
}

func (g perKindGenerator) Generate(ctx *genall.GenerationContext) error {
	metav1 := crd.FindMetav1(ctx.Roots)
	if metav1 == nil {
		return fmt.Errorf("no API types found in the given packages")
	}
	kinds := crd.FindKubeKinds(g.newParser(ctx), metav1)
	if len(kinds) == 0 {
		return fmt.Errorf("no API kinds found in the given packages")
	}
	for _, gk := range kinds {
		p := g.newParser(ctx)
		p.NeedCRDFor(gk, nil)
		out, ok := p.CustomResourceDefinitions[gk]
		if !ok {
			return fmt.Errorf("no CRD generated for %s", gk)
		}
		crd.FixTopLevelMetadata(out)
		out.Annotations = map[string]string{"controller-gen.kubebuilder.io/version": generatorVersion}
		for _, v := range out.Spec.Versions {
			if v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
				if m, ok := v.Schema.OpenAPIV3Schema.Properties["metadata"]; ok {
					m.Description = ""
					v.Schema.OpenAPIV3Schema.Properties["metadata"] = m
				}
			}
		}
		if err := checkUniqueVersions(&out); err != nil {
			return err
		}
		name := fmt.Sprintf("%s_%s.yaml", out.Spec.Group, out.Spec.Names.Plural)
		if err := ctx.WriteYAML(name, "", []any{&out},
			genall.WithTransform(func(obj map[string]any) error { delete(obj, "status"); return nil }),
			genall.WithTransform(genall.TransformRemoveCreationTimestamp),
		); err != nil {
			return err
		}
	}
	return nil
}

func checkUniqueVersions(c *apiextensionsv1.CustomResourceDefinition) error {
	seen := map[string]bool{}
	for _, v := range c.Spec.Versions {
		if seen[v.Name] {
			return fmt.Errorf("%s: version %s generated twice", c.Name, v.Name)
		}
		seen[v.Name] = true
	}
	return nil
}

func main() {
	outDir := flag.String("output-dir", "", "directory to write the CRD YAML files to")
	flag.Parse()
	if *outDir == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: crdgen -output-dir DIR PACKAGE...")
		os.Exit(2)
	}
	var gen genall.Generator = perKindGenerator{Generator: crd.Generator{CRDVersions: []string{"v1"}}}
	rt, err := genall.Generators{&gen}.ForRoots(flag.Args()...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	rt.OutputRules = genall.OutputRules{Default: genall.OutputToDirectory(*outDir)}
	if hadErrs := rt.Run(); hadErrs {
		os.Exit(1)
	}
}
