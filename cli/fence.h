/* SPDX-License-Identifier: MIT */
#pragma once

/* snowid fence [--ahead MS] [snowidd's settings]: 0, or 1/2 after a message. */
int cmd_fence(int argc, char **argv);
