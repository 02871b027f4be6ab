package main

import (
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/emptypb"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
)

func newProfilesCmd() *cobra.Command {
	return newClientGroup("profiles", "Create, list, show, update and archive profiles",
		newProfilesCreateCmd, newProfilesListCmd, newProfilesGetCmd, newProfilesUpdateCmd,
		newProfilesDeleteCmd, newProfilesReposCmd)
}

func newProfilesCreateCmd(f *clientFlags) *cobra.Command {
	cmd := clientCmd(f, "create --name NAME --image IMAGE_ID [flags]",
		"Create a profile from flags, a JSON CreateProfileRequest (--from-file), or both", cobra.NoArgs,
		func(c *apiClient, cmd *cobra.Command, _ []string) error {
			req := &appv1.CreateProfileRequest{}
			if err := applyProfileFlags(cmd, req); err != nil {
				return err
			}
			return send(c, c.profiles.CreateProfile, req, nil)
		})
	addProfileFlags(cmd)
	return cmd
}

func newProfilesUpdateCmd(f *clientFlags) *cobra.Command {
	cmd := idCmd(f, "update ID [flags]", "Change the profile fields that flags name, keeping the others",
		func(c *apiClient, cmd *cobra.Command, id string) error {
			cur, err := call(c, c.profiles.GetProfile, &appv1.GetProfileRequest{Id: id})
			if err != nil {
				return err
			}
			spec := &appv1.CreateProfileRequest{}
			if err := convert(spec, cur.GetProfile()); err != nil {
				return err
			}
			if err := applyProfileFlags(cmd, spec); err != nil {
				return err
			}
			req := &appv1.UpdateProfileRequest{}
			if err := convert(req, spec); err != nil {
				return err
			}
			req.Id = id
			return send(c, c.profiles.UpdateProfile, req, nil)
		})
	cmd.Long = `update reads the profile, changes only the fields whose flags are given (a list flag
replaces the whole list; give it '' to empty it), and sends the whole profile back, since the
server replaces every field. --from-file sets the fields present in the file.`
	addProfileFlags(cmd)
	return cmd
}

func newProfilesListCmd(f *clientFlags) *cobra.Command {
	req := &appv1.ListProfilesRequest{}
	cmd := clientCmd(f, "list [--include-archived]", "List profiles", cobra.NoArgs, func(c *apiClient, _ *cobra.Command, _ []string) error {
		return send(c, c.profiles.ListProfiles, req, func(w io.Writer, resp *appv1.ListProfilesResponse) {
			table(w, []string{"ID", "NAME", "IMAGE", "HARNESS", "ARCHIVED"}, resp.GetProfiles(), func(p *appv1.Profile) []string {
				return []string{p.GetId(), p.GetName(), p.GetImageId(), p.GetHarness(), yesNo(p.GetArchived())}
			})
		})
	})
	cmd.Flags().BoolVar(&req.IncludeArchived, "include-archived", false, "list archived profiles too")
	return cmd
}

func newProfilesGetCmd(f *clientFlags) *cobra.Command {
	return idCmd(f, "get ID", "Show a profile", func(c *apiClient, _ *cobra.Command, id string) error {
		return send(c, c.profiles.GetProfile, &appv1.GetProfileRequest{Id: id}, nil)
	})
}

func newProfilesDeleteCmd(f *clientFlags) *cobra.Command {
	return idCmd(f, "delete ID", "Archive a profile", func(c *apiClient, _ *cobra.Command, id string) error {
		return send(c, c.profiles.DeleteProfile, &appv1.DeleteProfileRequest{Id: id}, func(w io.Writer, _ *emptypb.Empty) {
			fmt.Fprintf(w, "archived profile %s\n", id)
		})
	})
}

func newProfilesReposCmd(f *clientFlags) *cobra.Command {
	short := "List the git repositories found in a profile's image, with their remotes"
	return idCmd(f, "repos ID", short, func(c *apiClient, _ *cobra.Command, id string) error {
		req := &appv1.DiscoverProfileReposRequest{ProfileId: id}
		return send(c, c.profiles.DiscoverProfileRepos, req, func(w io.Writer, resp *appv1.DiscoverProfileReposResponse) {
			var rows [][]string
			for _, r := range resp.GetRepos() {
				for _, rm := range r.GetRemotes() {
					rows = append(rows, []string{r.GetPath(), rm.GetName(), rm.GetUrl()})
				}
				if len(r.GetRemotes()) == 0 {
					rows = append(rows, []string{r.GetPath(), "", ""})
				}
			}
			table(w, []string{"PATH", "REMOTE", "URL"}, rows, func(r []string) []string { return r })
		})
	})
}

// addProfileFlags declares the flags that set a profile's fields, for create and update.
func addProfileFlags(cmd *cobra.Command) {
	fl := cmd.Flags()
	for _, f := range [][2]string{
		{"from-file", "read a CreateProfileRequest as JSON from `FILE` (- for standard input); flags override it"},
		{"name", "profile name"},
		{"image", "the `IMAGE_ID` sessions start from"},
		{"description", "description"},
		{"icon", "icon"},
		{"network-default", "allow or deny network access by default"},
		{"harness", "harness"},
		{"model", "model"},
		{"effort", "effort level"},
		{"designation", "designation"},
		{"model-router", "model router"},
	} {
		fl.String(f[0], "", f[1])
	}
	for _, f := range [][2]string{
		{"env", "environment variable `K=V`"},
		{"skill", "skill `S`"},
		{"allow-host", "allow host `H`"},
		{"allow-host-pattern", "allow hosts matching `P`"},
		{"repo", "repository `PATH=REMOTE_URL`"},
		{"app", "app `NAME=PORT` served from sessions"},
	} {
		fl.StringArray(f[0], nil, f[1]+" (repeatable)")
	}
	fl.Bool("include-user-tokens", false, "give sessions the user's tokens")
}

// applyProfileFlags sets on spec the fields present in --from-file, then the fields of the
// flags the user gave, and leaves every other field as it is.
func applyProfileFlags(cmd *cobra.Command, spec *appv1.CreateProfileRequest) error {
	fl := cmd.Flags()
	if err := checkOneOf(cmd, "network-default", "allow", "deny"); err != nil {
		return err
	}
	if path, _ := fl.GetString("from-file"); path != "" {
		b, err := readInput(cmd, path)
		if err != nil {
			return err
		}
		file := &appv1.CreateProfileRequest{}
		if err := protojson.Unmarshal(b, file); err != nil {
			return usageError("--from-file %s: %v", path, err)
		}
		file.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			spec.ProtoReflect().Set(fd, v)
			return true
		})
	}
	for name, field := range map[string]*string{"name": &spec.Name, "image": &spec.ImageId, "description": &spec.Description, "icon": &spec.Icon} {
		if fl.Changed(name) {
			*field, _ = fl.GetString(name)
		}
	}
	for name, field := range map[string]**string{"harness": &spec.Harness, "model": &spec.Model, "effort": &spec.Effort, "designation": &spec.Designation, "model-router": &spec.ModelRouter} {
		if fl.Changed(name) {
			*field = optString(cmd, name)
		}
	}
	if fl.Changed("include-user-tokens") {
		spec.IncludeUserTokens, _ = fl.GetBool("include-user-tokens")
	}
	if fl.Changed("skill") {
		spec.Skills = nonEmpty(cmd, "skill")
	}
	if fl.Changed("network-default") || fl.Changed("allow-host") || fl.Changed("allow-host-pattern") {
		if spec.Network == nil {
			spec.Network = &appv1.ProfileNetwork{}
		}
		if fl.Changed("network-default") {
			spec.Network.Default, _ = fl.GetString("network-default")
		}
		if fl.Changed("allow-host") {
			spec.Network.AllowHosts = nonEmpty(cmd, "allow-host")
		}
		if fl.Changed("allow-host-pattern") {
			spec.Network.AllowHostPatterns = nonEmpty(cmd, "allow-host-pattern")
		}
	}
	return applyProfilePairs(cmd, spec)
}

// applyProfilePairs sets the fields of the K=V list flags the user gave: --env, --repo, --app.
func applyProfilePairs(cmd *cobra.Command, spec *appv1.CreateProfileRequest) error {
	fl := cmd.Flags()
	env, err := keyValues(cmd, "env")
	if err != nil {
		return err
	}
	repos, err := keyValues(cmd, "repo")
	if err != nil {
		return err
	}
	apps, err := keyValues(cmd, "app")
	if err != nil {
		return err
	}
	if fl.Changed("env") {
		spec.EnvVars = map[string]string{}
		for _, kv := range env {
			spec.EnvVars[kv[0]] = kv[1]
		}
	}
	if fl.Changed("repo") {
		spec.Repos = nil
		for _, kv := range repos {
			spec.Repos = append(spec.Repos, &appv1.ProfileRepo{Path: kv[0], RemoteUrl: kv[1]})
		}
	}
	if fl.Changed("app") {
		spec.Apps = nil
		for _, kv := range apps {
			port, err := strconv.ParseUint(kv[1], 10, 16)
			if err != nil || port == 0 {
				return usageError("--app %s=%s: the port must be a number from 1 to 65535", kv[0], kv[1])
			}
			spec.Apps = append(spec.Apps, &appv1.SessionApp{Name: kv[0], Port: uint32(port)})
		}
	}
	return nil
}

// convert copies src's fields into dst by name. Profile, CreateProfileRequest and
// UpdateProfileRequest share their field names, so a field added to all three carries over
// without a change here.
func convert(dst, src proto.Message) error {
	b, err := protojson.Marshal(src)
	if err != nil {
		return err
	}
	return protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(b, dst)
}
