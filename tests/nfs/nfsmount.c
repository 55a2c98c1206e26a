/* mount -t nfs with the kernel's own text options: nfsmount SERVER:/PATH DIR OPTIONS */
#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <sys/mount.h>
int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: nfsmount SRC DIR OPTIONS\n"); return 2; }
    if (mount(argv[1], argv[2], "nfs", 0, argv[3]) != 0) {
        fprintf(stderr, "nfsmount: %s\n", strerror(errno));
        return 1;
    }
    return 0;
}
