// Safe subPath mounts (upstream pkg/volume/util/subpath, Linux): a volumeMount's subPath is
// opened component by component from the volume's root without following any symlink, and the
// descriptor itself is bind-mounted onto a stable path under the pod's directory,
// <podDir>/volume-subpaths/<volume>/<container>/<index>, which is what the runtime is given. A
// container that swaps a directory of the volume for a symlink between the check and the
// runtime's mount then gets either an error or a directory of the volume, never the host.
//
// JS API (registered on the addon's exports; every call is one libuv threadpool job):
//   subpathOpen(volumePath: string, subPath: string, opts?: { create?: boolean; openat2?: boolean; resolve?: boolean })
//       : Promise<{ path, dev, ino, type, resolver }>
//     Resolves the subPath as subpathBind does (symlinks that stay inside the volume are
//     resolved first, as upstream's EvalSymlinks; then every component of the result is opened
//     with O_PATH|O_NOFOLLOW, a symlink at any step refused), reports what the descriptor
//     is (path: readlink of /proc/self/fd/N; type: dir|file|symlink|other; resolver: openat2 or
//     openat) and closes it. create: a missing subPath is made as directories with the volume
//     root's mode first (upstream SafeMakeDir). openat2: false forces the per-component walk.
//     resolve: false skips the first resolution: a symlink anywhere in the subPath is refused.
//   subpathBind(req: { volumePath, subPath, podDir, volumeName, containerName, index, openat2? })
//       : Promise<{ hostPath: string; reused: boolean }>
//     Creates a missing subPath (as subpathOpen with create), opens it safely, and bind-mounts
//     the descriptor onto <podDir>/volume-subpaths/<volumeName>/<containerName>/<index> (made a
//     directory or a file as the source is, each level opened without following symlinks).
//     An existing mount of the same file there is reused; another one is unmounted first.
//   subpathClean(podDir: string, volumeName?: string): Promise<{ unmounted: string[]; errors: string[] }>
//     upstream CleanSubPaths: every <podDir>/volume-subpaths/<volume>/<container>/<index> is
//     unmounted (UMOUNT_NOFOLLOW) and removed, then the emptied directories; nothing is
//     followed through a symlink and nothing is removed recursively.
//   A failure rejects with an Error whose message names the step and path, with code (the
//   errno's name) and phase ("create": making the subPath; "open"; "mount"). Bad arguments
//   throw a TypeError naming the argument.
#pragma once
#include <napi.h>

namespace kts {
void InitSubpath(Napi::Env env, Napi::Object exports);
}  // namespace kts
