/* caps.c — becoming the unprivileged sandbox user: drop every capability from
 * the bounding and ambient sets while we still hold CAP_SETPCAP, lock the
 * securebits so root semantics cannot come back, switch groups/gid/uid, then
 * zero effective/permitted/inheritable explicitly and set no_new_privs.
 * Seccomp (seccomp.c) comes after this step. */
#include "host/contain/steps.h"

#include <errno.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Dropping until EINVAL covers caps newer than our headers' CAP_LAST_CAP. */
static int drop_bounding(char *err, size_t len)
{
    for (int cap = 0; cap < 64; cap++) {
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0)
            continue;
        if (errno == EINVAL && cap > 0)
            return 0;
        return sgc_fail(err, len, "prctl(PR_CAPBSET_DROP, %d)", cap);
    }
    return 0;
}

/* KEEP_CAPS and NO_SETUID_FIXUP are locked off so the uid switch below is
 * guaranteed to clear the capability sets; NOROOT stops exec of a
 * setuid-root file from granting any. */
static int lock_securebits(char *err, size_t len)
{
    unsigned long bits = SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_NOROOT |
                         SECBIT_NOROOT_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |
                         SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
    if (prctl(PR_SET_SECUREBITS, bits, 0, 0, 0) != 0)
        return sgc_fail(err, len, "prctl(PR_SET_SECUREBITS, 0x%lx)", bits);
    return 0;
}

static int switch_ids(const sgc_spec *s, char *err, size_t len)
{
    if (setgroups(0, NULL) != 0)
        return sgc_fail(err, len, "setgroups(0, NULL)");
    if (setresgid(s->gid, s->gid, s->gid) != 0)
        return sgc_fail(err, len, "setresgid(%u, %u, %u)", s->gid, s->gid, s->gid);
    if (setresuid(s->uid, s->uid, s->uid) != 0)
        return sgc_fail(err, len, "setresuid(%u, %u, %u)", s->uid, s->uid, s->uid);
    return 0;
}

/* The uid switch already emptied them; capset makes it a checked fact. */
static int zero_caps(char *err, size_t len)
{
    struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {{0}};
    if (syscall(SYS_capset, &hdr, data) != 0)
        return sgc_fail(err, len, "capset(v3, {0, 0, 0})");
    return 0;
}

int sgc_caps_enter(const sgc_spec *s, char *err, size_t len)
{
    if (drop_bounding(err, len))
        return -1;
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0)
        return sgc_fail(err, len, "prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)");
    if (lock_securebits(err, len) || switch_ids(s, err, len) || zero_caps(err, len))
        return -1;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return sgc_fail(err, len, "prctl(PR_SET_NO_NEW_PRIVS, 1)");
    return 0;
}
