export { calendarMonth, CALENDAR_MONTH_DEFAULT_IDLE_FLUSH_MS, type CalendarMonthOptions } from './calendar-month.js';
